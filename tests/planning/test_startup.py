"""The workflow's checks as Snakemake parses it (`checked_workflow`), run in process."""

import pytest
import yaml

from asyncfl.planning.startup import checked_workflow
from asyncfl.settings.errors import InputError
from bad_configs import BAD_CONFIGS, bad_config_file
from conftest import REPO


@pytest.mark.parametrize("edit,message", BAD_CONFIGS)
def test_bad_config_is_refused_naming_the_key(tmp_path, edit, message):
    """In process, what the workflow runs as Snakemake parses it (each case through `snakemake -n` cost
    CI's two cores about 1.6 s: three of them go through Snakemake in tests/test_workflow.py)."""
    path = bad_config_file(tmp_path, edit)
    with pytest.raises(InputError) as refused:
        checked_workflow(yaml.safe_load(path.read_text()), [str(path)], REPO / "config/costs.csv")
    assert message in str(refused.value)
