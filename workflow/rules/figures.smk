rule figures:
    input:
        runs=lambda wildcards: run_files(
            wildcards.experiment, ("metrics.csv", "events.csv", "run.json")
        ),
        stats=lambda wildcards: partition_file(
            experiment(wildcards), experiment(wildcards)["seeds"][0], ".json"
        ),
    output:
        [
            report(
                f"results/figures/{{experiment}}/{figure}.png",
                caption=f"../report/{figure.removesuffix(f'_J{REFERENCE_J}')}.rst",
                category="{experiment}",
                labels={"figure": figure},
            )
            for figure in FIGURES
        ],
        expand("results/figures/{{experiment}}/{figure}.pdf", figure=FIGURES),
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
        " --title {wildcards.experiment:q} --out {params.out:q} > {log:q} 2>&1"


rule as_coded_figure:
    input:
        runs=lambda wildcards: [
            f"{folder}/{file}"
            for folder in as_coded_run_folders(wildcards.experiment)
            for file in ("metrics.csv", "events.csv", "run.json")
        ],
        stats=lambda wildcards: partition_file(
            experiment(wildcards), experiment(wildcards)["seeds"][0], ".json"
        ),
    output:
        report(
            f"results/figures/{{experiment}}/{AS_CODED_FIGURE}.png",
            caption=f"../report/{AS_CODED_FIGURE}.rst",
            category="{experiment}",
            labels={"figure": AS_CODED_FIGURE},
        ),
        f"results/figures/{{experiment}}/{AS_CODED_FIGURE}.pdf",
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
        " --reference-j {params.reference_j:q} --title {wildcards.experiment:q} --out {params.out:q} > {log:q} 2>&1"
