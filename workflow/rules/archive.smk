localrules:
    archive,


rule archive:
    input:
        figures=all_figures(),
        runs=[file for name in config["experiments"] for file in run_files(name, ("metrics.csv", "events.csv", "run.json"))],
        partitions=sorted(
            {
                partition_file(exp, seed, ".json")
                for exp in config["experiments"].values()
                for seed in exp["seeds"]
            }
        ),
    output:
        ARCHIVE,
    log:
        "logs/archive.log",
    params:
        configs=workflow.configfiles,
        out=ARCHIVE_DIR,
    conda:
        TORCH_ENV
    shell:
        ASYNCFL + ' archive --files {input} --config {params.configs} --command "$ASYNCFL_COMMAND"'
        " --out {params.out} > {log} 2>&1"
