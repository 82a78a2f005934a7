from asyncfl.planning.experiments import verdict_options

# The figures each rule draws (asyncfl.settings.catalogue)
FIGURES = scope_figures(Scope.EXPERIMENT, REFERENCE_J)
TIMING_FIGURES = scope_figures(Scope.EXPERIMENT, REFERENCE_J, timing_only=True)
# The experiments whose runs are timing-only (train: {trainer: none}), and the others
TIMED = [name for name, setup in config["experiments"].items() if timing_only(setup)]
TRAINED = [name for name in config["experiments"] if name not in TIMED]
EMULATION_FIGURES = scope_figures(Scope.EMULATION, REFERENCE_J)
STRAGGLER_FIGURES = scope_figures(Scope.SEVERITY_SWEEP, REFERENCE_J)


SIM_VS_REAL_FIGURE = catalogued("sim_vs_real")
VERDICT_CURVE_FIGURE = catalogued("verdict_over_budget")


# The experiments with runs on the real clock with measured durations (their sim_vs_real figure)
MEASURED = [name for name, plan in PLAN.experiments.items() if plan.measured_runs]


# An experiment's figures; a timing-only experiment's (train: {trainer: none}) are those drawn from the
# clock alone, by a rule of its own that matches only those experiments (asyncfl figures sees the runs'
# kind itself).
for kind, figures, names in (
    ("figures", FIGURES, TRAINED),
    ("timing_figures", TIMING_FIGURES, TIMED),
):

    rule:
        name:
            kind
        input:
            runs=lambda wildcards: run_files(wildcards.experiment, RUN_SUMMARY),
            stats=get_partition_stats,
            trace=get_availability_trace,
        output:
            [figure_png(figure) for figure in figures],
            [figure_pdf(figure) for figure in figures],
        log:
            "logs/figures/{experiment}.log",
        wildcard_constraints:
            experiment=one_of(names),
        conda:
            torch_env
        resources:
            **CPU_RESOURCES,
        params:
            out=subpath(output[0], parent=True),
            runs=lambda wildcards: [
                run.folder for run in PLAN[wildcards.experiment].runs
            ],
            reference_j=REFERENCE_J,
        shell:
            ASYNCFL
            + " figures --runs {params.runs:q} --partition-stats {input.stats:q} --reference-j {params.reference_j:q}"
            " --title={wildcards.experiment:q} --out {params.out:q} > {log:q} 2>&1"


# The figures of the paper's code as it ran beside the algorithms as described, each drawn where the
# experiment runs every algorithm it compares (asyncfl.settings.catalogue, Scope.EMULATION).
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
        resources:
            **CPU_RESOURCES,
        params:
            out=subpath(output[0], parent=True),
            runs=emulation_run_folders(emulation),
            emulation=emulation.name,
            reference_j=REFERENCE_J,
        shell:
            ASYNCFL
            + " figures --emulation {params.emulation:q} --runs {params.runs:q} --partition-stats {input.stats:q}"
            " --reference-j {params.reference_j:q} --title={wildcards.experiment:q} --out {params.out:q} > {log:q} 2>&1"


# The claim that AFL copes with stragglers better than synchronous FL, measured by an experiment that
# sweeps straggler severity (asyncfl.analysis.stragglers; docs/theory.md "Theory checks").
rule straggler_claim:
    input:
        runs=lambda wildcards: run_files(wildcards.experiment, RUN_SUMMARY),
        stats=get_partition_stats,
    output:
        [figure_png(figure) for figure in STRAGGLER_FIGURES],
        [figure_pdf(figure) for figure in STRAGGLER_FIGURES],
        table=FIGURE.format(experiment="{experiment}", name=STRAGGLER_FIGURES[0].name)
        + ".csv",
        verdicts=FIGURE.format(experiment="{experiment}", name=STRAGGLER_VERDICTS)
        + ".csv",
        curve=FIGURE.format(experiment="{experiment}", name=VERDICT_CURVE_FIGURE.name)
        + ".csv",
    log:
        "logs/figures/{experiment}_straggler_claim.log",
    priority: 1  # the end of the pipeline's longest chain (tuning, choice, severities)
    conda:
        torch_env
    resources:
        **CPU_RESOURCES,
    params:
        out=subpath(output[0], parent=True),
        runs=lambda wildcards: [run.folder for run in PLAN[wildcards.experiment].runs],
        severities=lambda wildcards: json.dumps(experiment(wildcards)["severities"]),
        target=lambda wildcards: experiment(wildcards)["target_accuracy"],
        other_targets=lambda wildcards: experiment(wildcards).get("other_targets", []),
        replication_seeds=lambda wildcards: experiment(wildcards).get(
            "replication_seeds", []
        ),
        budget=lambda wildcards: experiment(wildcards)["budget"]["virtual_time"],
        other_budgets=lambda wildcards: experiment(wildcards).get("other_budgets", []),
        # what the experiment declares about its verdicts: margin, family, power (each where it does)
        declared=lambda wildcards: verdict_options(experiment(wildcards)),
    shell:
        ASYNCFL
        + " stragglers --runs {params.runs:q} --severities {params.severities:q} --partition-stats {input.stats:q}"
        " --target-accuracy {params.target:q} --other-targets {params.other_targets:q}"
        " --replication-seeds {params.replication_seeds:q}"
        " --virtual-time {params.budget:q} --other-budgets {params.other_budgets:q} {params.declared:q}"
        " --title={wildcards.experiment:q} --out {params.out:q} > {log:q} 2>&1"


# The simulator against an experiment's runs on the real clock with measured durations: each replayed on
# the virtual clock with its dispatches' measured training, and compared (docs/clocks.md "The simulator
# against measured runs"). A replay trains what its run trained: a job like theirs.
rule sim_vs_real:
    input:
        data=get_prepared_data,
        runs=lambda wildcards: [
            f"{run.folder}/{file}"
            for run in PLAN[wildcards.experiment].measured_runs
            for file in RUN_SUMMARY
        ],
        partitions=lambda wildcards: [
            run.partition for run in PLAN[wildcards.experiment].measured_runs
        ],
    output:
        figure_png(SIM_VS_REAL_FIGURE),
        figure_pdf(SIM_VS_REAL_FIGURE),
        table=FIGURE.format(experiment="{experiment}", name=SIM_VS_REAL_FIGURE.name)
        + ".csv",
        replays=directory(REPLAY_DIR),
    log:
        "logs/figures/{experiment}_sim_vs_real.log",
    wildcard_constraints:
        experiment=one_of(MEASURED),
    conda:
        torch_env
    threads: TRAIN_THREADS
    resources:
        **TRAIN_RESOURCES,
        runtime=lambda wildcards, attempt: attempt_minutes(
            PLAN[wildcards.experiment].replay_minutes, attempt, MAX_RUNTIME
        ),
    params:
        runs=lambda wildcards: [
            run.folder for run in PLAN[wildcards.experiment].measured_runs
        ],
        root=lambda wildcards: data_root(PLAN[wildcards.experiment].dataset),
        out=subpath(output[0], parent=True),
    shell:
        ASYNCFL
        + " sim-vs-real --runs {params.runs:q} --partitions {input.partitions:q} --root {params.root:q}"
        " --title={wildcards.experiment:q} --out {params.out:q} --replays {output.replays:q} > {log:q} 2>&1"
