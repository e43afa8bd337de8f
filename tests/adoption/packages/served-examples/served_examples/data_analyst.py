"""`pydantic_ai_examples.data_analyst`: DataFrames kept in its deps and named `Out[n]` to the model, its
`load_dataset` tool (what reaches out to the dataset hub) gated. Offline here (`HF_HUB_OFFLINE`): the
dataset is a CSV folder the wrapper writes in the working directory, which `datasets` loads as a
local dataset.

Its deps keep DataFrames, which are not serializable state: the factory builds them anew for each
segment, so a frame loaded before a gated call waits is gone after it (docs/agents.md, "Which deps
persist across an approval"). Gating the load, the first tool, keeps every `Out[n]` in one segment."""

from __future__ import annotations

from pathlib import Path

from pydantic_ai_examples import data_analyst as example

from sursis import RunInfo, ToolOptions, adopt

REVIEWS = Path("reviews")
"""The dataset the script loads, by a path relative to the processes' working directory."""
REVIEWS_CARD = """---
dataset_info:
  features:
  - name: text
    dtype: string
  - name: label
    dtype: int64
  splits:
  - name: train
    num_bytes: 40
    num_examples: 3
---
Movie reviews, labelled 1 (positive) or 0 (negative).
"""
# The card names the splits, as a hub dataset's does: the example checks the split before loading.
REVIEWS.mkdir(exist_ok=True)
(REVIEWS / "README.md").write_text(REVIEWS_CARD)
(REVIEWS / "train.csv").write_text("text,label\ngreat film,1\ndull,0\nawful,0\n")


def analyst_deps(info: RunInfo) -> example.AnalystAgentDeps:
    return example.AnalystAgentDeps()


AGENT = adopt(
    example.analyst_agent,
    name="data-analyst",
    model="scripted",
    deps=analyst_deps,
    tools={
        "load_dataset": ToolOptions(
            approval="requires_approval", idempotent=True, effect="Load the {split} split of {path}"
        )
    },
)
