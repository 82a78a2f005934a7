rule figures:
    input:
        runs=lambda wildcards: run_files(wildcards.experiment, RUN_SUMMARY),
        stats=get_partition_stats,
        trace=get_availability_trace,
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


# The figures of the paper's code as it ran beside the algorithms as described, each drawn where the
# experiment runs every algorithm it compares (asyncfl.spec.layout.EMULATION_FIGURES).
for emulation in EMULATION_FIGURES:

    rule:
        name:
            f"figure_{emulation.name}"
        input:
            runs=emulation_run_files(emulation),
            stats=get_partition_stats,
        output:
            figure_png(emulation),
            figure_pdf(emulation),
        log:
            f"logs/figures/{{experiment}}_{emulation.name}.log",
        conda:
            torch_env
        params:
            out=subpath(output[0], parent=True),
            runs=emulation_run_folders(emulation),
            emulation=emulation.name,
            reference_j=REFERENCE_J,
        shell:
            ASYNCFL
            + " figures --emulation {params.emulation:q} --runs {params.runs:q} --partition-stats {input.stats:q}"
            " --reference-j {params.reference_j:q} --title={wildcards.experiment:q} --out {params.out:q} > {log:q} 2>&1"
