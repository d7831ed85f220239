"""The licence and the citation: the MIT LICENSE that pyproject names, a CITATION.cff of this
version citing the two papers the README names, the citing page's BibTeX of the same papers,
and both files in the wheel's metadata (license-files; .ci/run checks the built wheel)."""

from __future__ import annotations

import re

import pytest
import yaml

from readme_blocks import README, blocks

ROOT = README.parent
tomllib = pytest.importorskip("tomllib")
PAPERS = {"2509.26030", "2602.05725"}


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def test_the_licence_is_the_mit_licence_pyproject_names_and_ships():
    project = _project()
    assert project["license"] == "MIT"
    assert project["license-files"] == ["LICENSE", "CITATION.cff"]
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("MIT License\n\nCopyright (c) ")
    assert 'THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND' in text


def test_the_citation_cites_this_version_and_the_two_papers_the_readme_names():
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert cff["cff-version"] == "1.2.0" and cff["type"] == "software"
    assert cff["version"] == _project()["version"] and cff["license"] == "MIT"
    intro = README.read_text().split("\n## ", 1)[0]
    named = set(re.findall(r"arXiv (\d{4}\.\d{5})", intro))
    assert named == PAPERS
    cited = {}
    for ref in cff["references"]:
        (doi,) = [i["value"] for i in ref["identifiers"] if i["type"] == "doi"]
        arxiv = doi.removeprefix("10.48550/arXiv.")
        assert ref["title"] in intro  # the title the README gives it
        cited[arxiv] = [f"{a['given-names']} {a['family-names']}" for a in ref["authors"]]
    assert set(cited) == PAPERS
    # the citing page's BibTeX cites the same papers with the same authors, in the same order
    (bibtex,) = blocks((ROOT / "docs" / "citing.md").read_text(), "bibtex")
    for entry in bibtex.split("@misc")[1:]:
        eprint = re.search(r"eprint\s*=\s*\{([^}]+)\}", entry)[1]
        authors = " ".join(re.search(r"author\s*=\s*\{([^}]+)\}", entry)[1].split())
        assert authors.split(" and ") == cited[eprint]
