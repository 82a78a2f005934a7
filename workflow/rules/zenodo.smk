# Optional target: `snakemake fetch_record` downloads the published record named in the
# config, to compare against (no such target while zenodo.record is null). Login nodes have the internet: a local rule.
if config["zenodo"]["record"]:

    localrules:
        fetch_record,

    rule fetch_record:
        output:
            directory(f"resources/zenodo/{config['zenodo']['record']}"),
        log:
            f"logs/fetch_record/{config['zenodo']['record']}.log",
        conda:
            torch_env
        params:
            record=config["zenodo"]["record"],
        shell:
            ASYNCFL
            + " fetch-record --record {params.record:q} --out {output:q} > {log:q} 2>&1"
