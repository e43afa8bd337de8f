"""`pydantic_ai_examples.medical_agent_delegation`: the triage agent, which consults specialist agents
inside its tools (on their own `openai:` model, the fake server here), the patient as its deps, its
`consult_specialist` tool gated."""

from __future__ import annotations

from pydantic_ai_examples import medical_agent_delegation as example

from sursis import RunInfo, ToolOptions, adopt


def patient_deps(info: RunInfo) -> example.PatientInfo:
    return example.PatientInfo(patient_id="P-7", age=54, known_conditions=["hypertension"])


AGENT = adopt(
    example.triage_agent,
    name="medical-triage",
    model="scripted",
    deps=patient_deps,
    tools={
        "consult_specialist": ToolOptions(
            approval="requires_approval", idempotent=True, effect="Consult the {specialty} specialist"
        )
    },
)
