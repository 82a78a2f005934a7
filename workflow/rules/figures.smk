rule figures:
    input:
        runs=lambda wildcards: run_files(wildcards.experiment, RUN_SUMMARY),
        stats=get_partition_stats,
    output:
        [figure_png(figure) for figure in FIGURES],
        [figure_pdf(figure) for figure in FIGURES],
    log:
        "logs/figures/{experiment}.log",
    conda:
        torch_env
    params:
        out=subpath(output[0], parent=True),
        runs=lambda wildcards: run_folders(wildcards.experiment),
        reference_j=REFERENCE_J,
    shell:
        ASYNCFL
        + " figures --runs {params.runs:q} --partition-stats {input.stats:q} --reference-j {params.reference_j:q}"
        " --title={wildcards.experiment:q} --out {params.out:q} > {log:q} 2>&1"


rule as_coded_figure:
    input:
        runs=lambda wildcards: [
            f"{folder}/{file}"
            for folder in as_coded_run_folders(wildcards.experiment)
            for file in RUN_SUMMARY
        ],
        stats=get_partition_stats,
    output:
        figure_png(AS_CODED_FIGURE),
        figure_pdf(AS_CODED_FIGURE),
    log:
        "logs/figures/{experiment}_as_coded.log",
    conda:
        torch_env
    params:
        out=subpath(output[0], parent=True),
        runs=lambda wildcards: as_coded_run_folders(wildcards.experiment),
        reference_j=REFERENCE_J,
    shell:
        ASYNCFL
        + " figures --as-coded --runs {params.runs:q} --partition-stats {input.stats:q}"
        " --reference-j {params.reference_j:q} --title={wildcards.experiment:q} --out {params.out:q} > {log:q} 2>&1"
