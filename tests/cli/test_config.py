from pathlib import Path

from faithrag.cli import main
from faithrag.cli.config import reference
from faithrag.config import Config

DOC = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def test_every_key_is_documented():
    for name, field in Config.model_fields.items():
        section = field.annotation
        fields = section.model_fields.items() if hasattr(section, "model_fields") else [
            (name, field)]
        for key, f in fields:
            assert f.description, f"{name}.{key} has no description"


def test_the_reference_in_docs_is_current(capsys):
    assert main(["config"]) == 0
    assert capsys.readouterr().out == reference()
    assert DOC.read_text(encoding="utf-8") == reference(), (
        "docs/configuration.md is stale: run `faithrag config > docs/configuration.md`")
