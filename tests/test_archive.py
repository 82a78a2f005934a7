"""The archive: normalised tarball, checksums, Zenodo metadata."""

import hashlib
import json
import tarfile

from asyncfl.archive import archive_results, zenodo_metadata

SETTINGS = {
    "title": "results",
    "license": "cc-by-4.0",
    "creators": [{"name": "A. Researcher"}],
    "paper": {"title": "A paper", "authors": "A. Author", "identifier": "10.1234/example"},
}


def make_results(root):
    (root / "results/run").mkdir(parents=True)
    (root / "results/run/metrics.csv").write_text("round,train_loss\n1,0.5\n")
    (root / "results/run/run.json").write_text(
        json.dumps(
            {
                "started_at": "2026-01-01T00:00:00+00:00",
                "finished_at": "2026-01-01T00:01:00+00:00",
                "wall_seconds": 60.0,
            }
        )
    )
    (root / "quick.yaml").write_text("reference_J: 5\n")
    return [root / "results/run/metrics.csv", root / "results/run/run.json"], [root / "quick.yaml"]


def test_same_inputs_give_the_same_bytes(tmp_path):
    for name in ("a", "b"):  # different folders, times and process paths
        files, configs = make_results(tmp_path / name)
        archive_results(files, configs, tmp_path / name, tmp_path / name / "out", SETTINGS, "snakemake")
    first, second = (tmp_path / n / "out/asyncfl-results.tar.gz" for n in ("a", "b"))
    assert first.read_bytes() == second.read_bytes()
    assert (tmp_path / "a/out/SHA256SUMS").read_text() == (tmp_path / "b/out/SHA256SUMS").read_text()
    with tarfile.open(first) as tar:
        assert tar.getnames() == ["config/quick.yaml", "results/run/metrics.csv", "results/run/run.json"]
        content = tar.extractfile("results/run/metrics.csv").read()
    assert (
        f"{hashlib.sha256(content).hexdigest()}  results/run/metrics.csv" in (tmp_path / "a/out/SHA256SUMS").read_text()
    )
    provenance = json.loads((tmp_path / "a/out/provenance.json").read_text())
    assert (
        provenance["runs"] == 1 and provenance["training_wall_seconds"] == 60.0 and provenance["command"] == "snakemake"
    )


def test_zenodo_metadata_relates_the_paper():
    metadata = zenodo_metadata(SETTINGS)
    assert metadata["related_identifiers"] == [
        {"identifier": "10.1234/example", "relation": "isSupplementTo", "resource_type": "publication-article"}
    ]
    assert metadata["upload_type"] == "dataset" and metadata["creators"] == [{"name": "A. Researcher"}]
