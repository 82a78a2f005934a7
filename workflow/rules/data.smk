# Downloads need the internet, which compute nodes often lack: this runs where snakemake runs.
localrules:
    prepare_data,


rule prepare_data:
    output:
        prepared_marker("{dataset}"),
    log:
        "logs/prepare_data/{dataset}.log",
    conda:
        torch_env
    params:
        root=lambda wildcards: data_root(wildcards.dataset),
    shell:
        ASYNCFL
        + " data --dataset {wildcards.dataset:q} --root {params.root:q} --summary {output:q} > {log:q} 2>&1"
