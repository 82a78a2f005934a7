SAMPLING_VARIANCE_FIGURE = catalogued("sampling_variance")


# The paper's sampling claim on real client updates: every client trained once from the final
# global model of the experiment's AFL run at reference_J (asyncfl.analysis.theory, docs/theory.md "Theory checks").
rule theory:
    input:
        data=get_prepared_data,
        run=lambda wildcards: [
            f"{PLAN[wildcards.experiment].probed_run}/{f}" for f in (RUN_RECORD, MODEL)
        ],
        partition=lambda wildcards: partition_file(
            experiment(wildcards), experiment(wildcards)["seeds"][0]
        ),
        trace=get_availability_trace,
    output:
        table=FIGURE.format(
            experiment="{experiment}", name=SAMPLING_VARIANCE_FIGURE.name
        )
        + ".csv",
        png=figure_png(SAMPLING_VARIANCE_FIGURE),
        pdf=figure_pdf(SAMPLING_VARIANCE_FIGURE),
    log:
        "logs/theory/{experiment}.log",
    conda:
        torch_env
    threads: TRAIN_THREADS
    resources:
        **TRAIN_RESOURCES,  # it trains every client once: a GPU job, as long as one run
        runtime=config["resources"]["train"]["runtime"],
    params:
        dataset=lambda wildcards: experiment(wildcards)["dataset"],
        root=lambda wildcards: data_root(experiment(wildcards)["dataset"]),
        run=lambda wildcards: PLAN[wildcards.experiment].probed_run,
        out=subpath(output.table, parent=True),
    shell:
        ASYNCFL
        + " theory --dataset {params.dataset:q} --root {params.root:q} --run {params.run:q}"
        " --partition {input.partition:q} --title={wildcards.experiment:q} --out {params.out:q} > {log:q} 2>&1"
