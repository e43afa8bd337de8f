"""`SURSIS_REVIEWER_BUDGETS` is checked at start: a negative limit or a misspelled key stops every
command with one line naming the setting (a misspelled limit would otherwise be no limit)."""

from __future__ import annotations

import pytest

from sursis.app.cli import main
from sursis.app.settings import Settings
from sursis.app.wiring.reviewer import budget_for


@pytest.mark.parametrize(
    ("value", "named"),
    [
        ('{"acme": {"calls_per_minute": -1}}', "SURSIS_REVIEWER_BUDGETS (acme.calls_per_minute)"),
        ('{"acme": {"calls_per_minut": 3}}', "SURSIS_REVIEWER_BUDGETS (acme.calls_per_minut)"),
        ('{"acme": {"tokens_per_day": "lots"}}', "SURSIS_REVIEWER_BUDGETS (acme.tokens_per_day)"),
        ('{"acme": 10}', "SURSIS_REVIEWER_BUDGETS (acme)"),
    ],
)
def test_a_wrong_reviewer_budget_stops_the_start_naming_it(
    value: str, named: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SURSIS_REVIEWER_BUDGETS", value)
    assert main(["migrate"]) == 2
    err = capsys.readouterr().err
    assert f"sursis: invalid setting {named}:" in err, err


def test_a_workspace_budget_overrides_only_what_it_names() -> None:
    settings = Settings(
        reviewer_calls_per_minute=30,
        reviewer_tokens_per_day=1000,
        reviewer_budgets={"acme": {"calls_per_minute": 0}},
    )
    of = budget_for(settings.policy)
    assert (of("acme").calls_per_minute, of("acme").tokens_per_day) == (0, 1000)
    assert (of("other").calls_per_minute, of("other").tokens_per_day) == (30, 1000)
