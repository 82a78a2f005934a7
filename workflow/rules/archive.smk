localrules:
    archive,


rule archive:
    input:
        figures=PLAN.figure_files(),
        runs=[
            file
            for name in config["experiments"]
            for file in run_files(name, RUN_SUMMARY)
        ],
        # each tuned experiment's choice: the settings its final runs trained with
        chosen=[layout.chosen for layout in TUNING_LAYOUTS],
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
        f"logs/archive/{CONFIG_NAME}.log",
    conda:
        torch_env
    params:
        configs=workflow.configfiles,
        out=subpath(output[0], parent=True),
    shell:
        ASYNCFL
        + ' archive --files {input:q} --config {params.configs:q} --command "$ASYNCFL_WORKFLOW_COMMAND"'
        " --out {params.out:q} > {log:q} 2>&1"
