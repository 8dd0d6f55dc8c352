"""`sweeper config`: the profiles' own commands; `sweeper config schema` prints the JSON
Schema of a profile, or of a scan's summary."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from sweeper.commands.common import printing
from sweeper.planning.profile import Profile
from sweeper.scan import document

HELP = "Profiles: YAML files whose keys are `sweeper run`'s options (and `nightly:`)."


def schema(
    verdicts: Annotated[
        bool, typer.Option("--verdicts", help="The scan summary's schema instead.")
    ] = False,
) -> None:
    """Print the JSON Schema of a profile, or of a scan's summary (for editors and CI checks)."""
    with printing():
        print(json.dumps(document.SCHEMA if verdicts else Profile.model_json_schema(), indent=2))
