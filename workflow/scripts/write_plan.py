"""Writes a training job's plan (`asyncfl train-many --plan`) from the rule's params: a file, since a
sweep of hundreds of runs outgrows a command line. Written aside and moved in whole."""

import json
import os
from pathlib import Path

snakemake = globals()["snakemake"]  # given by Snakemake's script directive
out = Path(snakemake.output[0])
partial = out.with_name(out.name + ".partial")
partial.write_text(json.dumps(snakemake.params.plan, indent=1) + "\n")
os.replace(partial, out)
Path(snakemake.log[0]).write_text(f"{len(snakemake.params.plan)} runs → {out}\n")
