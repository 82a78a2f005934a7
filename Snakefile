# Entry point from the repository root. The workflow is workflow/Snakefile (Snakemake's
# standard layout); an included file cannot set the default target, so it is named here.


include: "workflow/Snakefile"


rule default:
    default_target: True
    input:
        rules.all.input,
