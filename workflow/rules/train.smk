# A job that trains a sweep's runs (a severity, the tuning) spreads them over this many processes of
# TRAIN_THREADS threads each (`asyncfl train-many --processes`); their outputs are one process's.
TRAIN_PROCESSES = config["resources"]["train"]["processes"]
SWEEP_THREADS = TRAIN_THREADS * TRAIN_PROCESSES


TUNING_FIGURE = catalogued("tuning")


# The experiments by the shape of their training jobs: one job per severity, per `pack_runs` runs,
# or per run (the `train` rule; "(?!)" matches nothing)
SWEEPS = PLAN.of_shape(SEVERITY)
PACKED_EXPERIMENTS = PLAN.of_shape(PACKED)
ONE_RUN_PER_JOB = "|".join(map(re.escape, PLAN.of_shape(ONE_RUN))) or "(?!)"


# The command of the jobs that train several runs together in one process (`input.plan`: their runs, a file,
# since a sweep of hundreds of runs outgrows a command line)
# resources.train.at_once: the most runs each of those processes keeps going at once (its memory)
AT_ONCE = config["resources"]["train"].get("at_once")
AT_ONCE_OPTION = f" --at-once {AT_ONCE}" if AT_ONCE else ""
TRAIN_MANY = (
    ASYNCFL
    + " train-many --dataset {params.dataset:q} --root {params.root:q} --plan {input.plan:q}"
    + AT_ONCE_OPTION
    + " --threads {threads:q} > {log:q} 2>&1"
)
# The same, for the final runs of an experiment with `tune:`: each run name with the settings chosen for it
TRAIN_MANY_CHOSEN = TRAIN_MANY.replace(
    " --threads", " --chosen {input.chosen:q} --threads"
)


# One SLURM GPU job per experiment × algorithm × J × seed. A job that is killed leaves a
# checkpoint in its run folder; running the workflow again resumes it.
rule train:
    input:
        data=get_prepared_data,
        partition=lambda wildcards: partition_file(
            experiment(wildcards), wildcards.seed
        ),
        trace=get_availability_trace,
    output:
        metrics=f"{RUN_FOLDER}/{METRICS}",
        events=f"{RUN_FOLDER}/{EVENTS}",
        model=f"{RUN_FOLDER}/{MODEL}",
        run=f"{RUN_FOLDER}/{RUN_RECORD}",
    log:
        "logs/train/{experiment}/{algorithm}_J{J}_seed{seed}.log",
    benchmark:
        "benchmarks/train/{experiment}/{algorithm}_J{J}_seed{seed}.tsv"
    wildcard_constraints:
        experiment=ONE_RUN_PER_JOB,
    conda:
        torch_env
    threads: TRAIN_THREADS
    resources:
        **TRAIN_RESOURCES,
        runtime=get_train_runtime,
        # the job's attempt, which the run reads: a retry of a run that failed on its own ends at once
        attempt=lambda wildcards, attempt: attempt,
    params:
        dataset=lambda wildcards: experiment(wildcards)["dataset"],
        root=lambda wildcards: data_root(experiment(wildcards)["dataset"]),
        settings=lambda wildcards: json.dumps(
            PLAN[wildcards.experiment].run(RUN_FOLDER.format(**wildcards)).settings
        ),
        out=subpath(output.run, parent=True),
    shell:
        ASYNCFL
        + " train --dataset {params.dataset:q} --root {params.root:q} --partition {input.partition:q}"
        " --algorithm {wildcards.algorithm:q} --clients-per-round {wildcards.J:q} --seed {wildcards.seed:q}"
        " --settings {params.settings:q} --threads {threads:q} --attempt {resources.attempt}"
        " --out {params.out:q} > {log:q} 2>&1"


# A severity sweep trains many small runs: one job per severity trains all of its runs (algorithms and
# variants × seeds) in one process, `asyncfl train-many`, each run exactly as `asyncfl train` alone
# would. A job that is killed leaves each unfinished run's checkpoint; the runs it had finished, which
# Snakemake deletes with a failed job's outputs, come back from their kept links (docs/outputs.md).
# Jobs that train several runs are the longest: they start first (priority), so that none is left to
# run alone at the end while the other cores idle.
for sweep in SWEEPS:
    for part in range(PLAN[sweep].severity_parts):
        # a severity's runs in parts within resources.max_runtime (asyncfl.planning.cluster): one part keeps
        # the job's name, plan and log
        job = part_key("{severity}", part, PLAN[sweep].severity_parts)

        rule:
            name:
                f"train_{sweep.replace('-', '_')}"
                + job.removeprefix("{severity}").replace(".", "_")
            input:
                **PLAN[sweep].job_inputs(),
                **PLAN[sweep].chosen_input(),
                plan=train_plan(sweep, job),
            output:
                PLAN[sweep].severity_job_outputs(RUN_FILES, part),
            log:
                f"logs/train/{sweep}/{job}.log",
            benchmark:
                f"benchmarks/train/{sweep}/{job}.tsv"
            wildcard_constraints:
                severity="|".join(map(re.escape, PLAN[sweep].severities)),
            priority: 1
            conda:
                torch_env
            threads: SWEEP_THREADS
            resources:
                **TRAIN_RESOURCES,
                runtime=attempt_runtime(PLAN[sweep].jobs[part].runtime, MAX_RUNTIME),
            params:
                dataset=config["experiments"][sweep]["dataset"],
                root=experiment_data_root(sweep),
            shell:
                spread(
                    TRAIN_MANY_CHOSEN if sweep in TUNED else TRAIN_MANY,
                    TRAIN_PROCESSES,
                )


# An experiment's `tune:` grid (asyncfl.planning.tuning): every tuned run name at every grid point on the
# tuning seeds, one job; `select_tuning` then chooses each name's point on the validation split, and the
# final runs read the choice (TRAIN_MANY_CHOSEN). With `tune.extend`, the job searches past the grid's
# edges and chooses itself (`asyncfl tune`): which points it adds depends on the scores of those before.
SEARCH = (
    ASYNCFL
    + " tune --dataset {params.dataset:q} --root {params.root:q} --plan {input.plan:q}"
    + AT_ONCE_OPTION
    + " --threads {threads:q}"
    " --grid {params.grid:q} --axes {params.axes:q} --partition-stats {input.stats:q}"
    " --target-accuracy {params.target:q} --virtual-time {params.budget:q} --metric {params.metric:q}"
    " --title={params.title:q} --out {params.out:q} --chosen {output.chosen:q} --timings {output.timings:q}"
    " > {log:q} 2>&1"
)


for layout in TUNING_LAYOUTS:
    tuned = layout.experiment
    searched = bool(PLAN[tuned].search_axes)
    tuning_runs = [run for job in PLAN[tuned].tuning_parts(layout) for run in job.runs]
    # what choosing reads besides the runs (asyncfl.planning.tuning)
    CHOICE = tuning_choice(
        config["experiments"][tuned], PLAN[tuned].tuning_grid, layout
    )
    # a tuning's runs in parts within resources.max_runtime; one that searches is one job
    for tuning in PLAN[tuned].tuning_parts(layout):

        rule:
            name:
                f"tune_{tuned.replace('-', '_')}{layout.suffix}"
                + tuning.key.removeprefix(layout.job).replace(".", "_")
            input:
                **PLAN[tuned].job_inputs(),
                tuning_partitions=list(PLAN[tuned].tuning_partitions),
                plan=train_plan(tuned, tuning.key),
                stats=PLAN[tuned].tuning_stats if searched else [],
            output:
                [f"{run.folder}/{file}" for run in tuning.runs for file in RUN_FILES],
                **(choice_outputs(layout) if searched else {}),
                **({"timings": layout.timings} if searched else {}),
            log:
                f"logs/train/{tuned}/{tuning.key}.log",
            benchmark:
                f"benchmarks/train/{tuned}/{tuning.key}.tsv"
            priority: 2
            conda:
                torch_env
            threads: SWEEP_THREADS
            resources:
                **TRAIN_RESOURCES,
                runtime=attempt_runtime(tuning.runtime, MAX_RUNTIME),
            params:
                **(
                    CHOICE | {"out": subpath(output.png, parent=True)}
                    if searched
                    else {}
                ),
                **({"axes": json.dumps(PLAN[tuned].search_axes)} if searched else {}),
                dataset=config["experiments"][tuned]["dataset"],
                root=experiment_data_root(tuned),
            shell:
                spread(SEARCH if searched else TRAIN_MANY, TRAIN_PROCESSES)

    if searched:
        continue

    rule:
        name:
            f"select_tuning_{tuned.replace('-', '_')}{layout.suffix}"
        input:
            runs=[f"{run.folder}/{file}" for run in tuning_runs for file in RUN_SUMMARY],
            stats=PLAN[tuned].tuning_stats,
        output:
            **choice_outputs(layout),
        log:
            f"logs/figures/{tuned}_tuning{layout.suffix}.log",
        priority: 2  # as the tuning job: the sweep's final runs wait on the choice
        conda:
            torch_env
        resources:
            **CPU_RESOURCES,
        params:
            **CHOICE,
            out=subpath(output.png, parent=True),
            runs=[run.folder for run in tuning_runs],
        shell:
            ASYNCFL
            + " select --runs {params.runs:q} --grid {params.grid:q} --partition-stats {input.stats:q}"
            " --target-accuracy {params.target:q} --virtual-time {params.budget:q} --metric {params.metric:q}"
            " --title={params.title:q} --out {params.out:q} --chosen {output.chosen:q} > {log:q} 2>&1"


# An experiment with `pack_runs`: each job trains that many of its runs together in one process
# (`asyncfl train-many`: their clients in shared trainer calls), each exactly as `asyncfl train` alone
# would; it saves a process start per run (about 3 s of torch's imports on a CPU) and fills a GPU. A killed job resumes as a sweep's does.
for packed in PACKED_EXPERIMENTS:
    for pack in PLAN[packed].jobs:

        rule:
            name:
                f"train_{packed.replace('-', '_')}_{pack.key}"
            input:
                **PLAN[packed].job_inputs(),
                plan=train_plan(packed, pack.key),
            output:
                [f"{run.folder}/{file}" for run in pack.runs for file in RUN_FILES],
            log:
                f"logs/train/{packed}/{pack.key}.log",
            benchmark:
                f"benchmarks/train/{packed}/{pack.key}.tsv"
            priority: 1
            conda:
                torch_env
            threads: TRAIN_THREADS
            resources:
                **TRAIN_RESOURCES,
                runtime=attempt_runtime(pack.runtime, MAX_RUNTIME),
            params:
                dataset=config["experiments"][packed]["dataset"],
                root=experiment_data_root(packed),
            shell:
                TRAIN_MANY


# The plan of a job that trains several runs (`asyncfl train-many --plan`): written from the config by
# the workflow itself, so an edited experiment writes it again and retrains what changed.
rule plan_training:
    output:
        TRAIN_PLAN,
    log:
        "logs/plan/{experiment}/{job}.log",
    localrule: True
    conda:
        torch_env
    params:
        plan=get_train_plan,
    script:
        "../scripts/write_plan.py"
