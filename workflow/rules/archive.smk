localrules:
    archive,


rule archive:
    input:
        figures=all_figures(),
        runs=[
            file
            for name in config["experiments"]
            for file in run_files(name, ("metrics.csv", "events.csv", "run.json"))
        ],
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
    conda:
        TORCH_ENV
    params:
        configs=workflow.configfiles,
        out=subpath(output[0], parent=True),
        command=COMMAND,
    shell:
        ASYNCFL
        + " archive --files {input} --config {params.configs} --command {params.command:q}"
        " --out {params.out} > {log} 2>&1"
