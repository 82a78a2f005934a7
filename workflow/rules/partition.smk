# The command of the partition rules (a validation split's adds its fraction)
PARTITION_COMMAND = (
    ASYNCFL
    + " partition --dataset {wildcards.dataset:q} --root {params.root:q} --clients {wildcards.clients:q}"
    " --alpha {wildcards.alpha:q} --seed {wildcards.seed:q}"
    " --min-size {params.min_size:q} --out {output.npz:q} > {log:q} 2>&1"
)


# Partitions first (priority): every training job waits on one, and the straggler sweep's chain
# (tuning, selection, severities, claim) is the pipeline's longest: it should not start last. Local
# rules: a partition reads the training labels alone, under a CPU-second, where a cluster job would
# wait in the queue before every training job could start (docs/cluster.md "Your cluster").
rule partition:
    input:
        prepared_marker("{dataset}"),
    output:
        npz=f"{PARTITION}.npz",
        stats=f"{PARTITION}.json",
    log:
        "logs/partition/{dataset}_alpha{alpha}_C{clients}_seed{seed}.log",
    priority: 3
    localrule: True
    conda:
        torch_env
    resources:
        **CPU_RESOURCES,
    params:
        root=lambda wildcards: data_root(wildcards.dataset),
        min_size=config["min_partition_size"],
    shell:
        PARTITION_COMMAND


# A partition less a validation split (an experiment's validation_fraction, asyncfl.data.holdout)
rule partition_validated:
    input:
        prepared_marker("{dataset}"),
    output:
        npz=f"{VALIDATED_PARTITION}.npz",
        stats=f"{VALIDATED_PARTITION}.json",
    log:
        "logs/partition/{dataset}_alpha{alpha}_C{clients}_seed{seed}_val{validation}.log",
    priority: 3
    localrule: True
    conda:
        torch_env
    resources:
        **CPU_RESOURCES,
    params:
        root=lambda wildcards: data_root(wildcards.dataset),
        min_size=config["min_partition_size"],
    shell:
        PARTITION_COMMAND.replace(
            " --out", " --validation-fraction {wildcards.validation:q} --out"
        )
