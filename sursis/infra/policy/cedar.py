"""Conditions in Cedar: the published schema, the compilation of a rule list into a Cedar policy
set, its validation against the schema, and its evaluation for one call.

Each rule becomes one `permit` policy: `permit(principal, action in [<its tools>], resource)
when { <condition> };`. One Cedar request per call evaluates every rule of the workspace at once;
the policies that held (Cedar's `reasons`) and those that failed to evaluate (`errors`) go back to
the policy point, which takes the first that held in the rules' order. A workspace's compiled set
is parsed once and kept while its rules are unchanged.

cedarpy (4.5 MiB resident) is imported at the first rule validated or evaluated: a process whose
workspaces have no conditions never loads it.
"""

from __future__ import annotations

import json
import re
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from sursis.domain.policy.policies import CallFacts, InvalidPolicy, Matches, PolicyRule, WorkspacePolicy

NAMESPACE = "Sursis"
GENERIC_ACTION = "call"
"""The action of a tool the schema does not know; rules about every tool are checked against it."""
_DECIMAL_LIMIT = Decimal("922337203685477.5807")


@dataclass(frozen=True, slots=True)
class ToolShape:
    """What the schema says of one tool: its name and the JSON schema of its arguments."""

    name: str
    parameters: Mapping[str, Any]


def _cedar_type(schema: Mapping[str, Any]) -> tuple[dict[str, Any] | None, bool]:
    """The Cedar type of one JSON-schema property, and whether null is allowed (None: the value
    cannot be read by a condition: objects, mixed unions)."""
    options = schema.get("anyOf")
    if isinstance(options, list):
        kinds = [o for o in options if isinstance(o, dict) and o.get("type") != "null"]
        nullable = len(kinds) < len(options)
        if len(kinds) != 1:
            return None, nullable
        inner, _ = _cedar_type(kinds[0])
        return inner, nullable
    kind = schema.get("type")
    if kind == "integer":
        return {"type": "Long"}, False
    if kind == "boolean":
        return {"type": "Boolean"}, False
    if kind == "string":
        return {"type": "String"}, False
    if kind == "number":
        return {"type": "Extension", "name": "decimal"}, False
    if kind == "array" and isinstance(schema.get("items"), dict):
        element, _ = _cedar_type(schema["items"])
        return ({"type": "Set", "element": element} if element else None), False
    return None, False


def argument_types(parameters: Mapping[str, Any]) -> dict[str, tuple[dict[str, Any], bool]]:
    """Each readable argument: its Cedar type and whether it is required."""
    props = parameters.get("properties") or {}
    required = set(parameters.get("required") or ())
    types: dict[str, tuple[dict[str, Any], bool]] = {}
    for name, prop in props.items():
        if not isinstance(prop, dict):
            continue
        cedar, nullable = _cedar_type(prop)
        if cedar is not None:
            types[name] = (cedar, name in required and not nullable)
    return types


def _record(attributes: Mapping[str, Any]) -> dict[str, Any]:
    return {"type": "Record", "attributes": dict(attributes)}


def _string() -> dict[str, Any]:
    return {"type": "String"}


def _long() -> dict[str, Any]:
    return {"type": "Long"}


def _context(arguments: Mapping[str, tuple[dict[str, Any], bool]]) -> dict[str, Any]:
    return _record(
        {
            "workspace": _string(),
            "agent": _string(),
            "tool": _string(),
            "category": _string(),
            "server": _string(),
            "channel": _string(),
            "arguments": _record({n: {**t, "required": req} for n, (t, req) in arguments.items()}),
            "requester": _record({"key": _string(), "role": _string()}),
            "time": _record({"epoch": _long(), "hour": _long(), "weekday": _long()}),
            "approver": {
                **_record(
                    {"key": _string(), "role": _string(), "groups": {"type": "Set", "element": _string()}}
                ),
                "required": False,
            },
        }
    )


class CedarPolicies:
    """The published schema for a set of tools, and the conditions' compiler and evaluator."""

    def __init__(self, tools: Iterable[ToolShape], *, max_compiled: int = 256) -> None:
        self._arguments: dict[str, dict[str, tuple[dict[str, Any], bool]]] = {}
        for tool in tools:
            self._arguments.setdefault(tool.name, argument_types(tool.parameters))
        self._compiled: OrderedDict[
            tuple[str, tuple[tuple[str, str, tuple[str, ...]], ...]], CompiledPolicies
        ] = OrderedDict()
        self._max_compiled = max_compiled
        self._lock = threading.Lock()

    def schema(self, extra_tools: Iterable[str] = ()) -> dict[str, Any]:
        """The Cedar schema (JSON form): one action per tool, each with its arguments' types."""
        actions: dict[str, Any] = {}
        names: dict[str, Mapping[str, tuple[dict[str, Any], bool]]] = {
            GENERIC_ACTION: {},
            **self._arguments,
            **{t: {} for t in extra_tools if t not in self._arguments},
        }
        for name, arguments in sorted(names.items()):
            actions[name] = {
                "appliesTo": {
                    "principalTypes": ["Agent"],
                    "resourceTypes": ["Tool"],
                    "context": _context(arguments),
                }
            }
        return {NAMESPACE: {"entityTypes": {"Agent": {}, "Tool": {}}, "actions": actions}}

    def knows(self, tool: str) -> bool:
        return tool in self._arguments

    def validate(self, rules: Sequence[PolicyRule]) -> None:
        """Raises `InvalidPolicy` naming each rule whose condition Cedar cannot parse or type."""
        import cedarpy

        errors: list[dict[str, Any]] = []
        for i, rule in enumerate(rules):
            text = _policy_text(f"r{i}", rule)
            try:
                parsed = json.loads(cedarpy.policies_to_json_str(text))
            except (ValueError, RuntimeError) as exc:
                errors.append({"loc": ["rules", str(i), "when"], "msg": _short(str(exc))})
                continue
            if len(parsed.get("staticPolicies", {})) != 1 or parsed.get("templates"):
                errors.append(
                    {"loc": ["rules", str(i), "when"], "msg": "a condition is one Cedar expression"}
                )
        if not errors:
            named = {t for r in rules for t in r.tools}
            text = "\n".join(_policy_text(f"r{i}", r) for i, r in enumerate(rules))
            result = cedarpy.validate_policies(text, json.dumps(self.schema(named)))
            for error in result.errors:
                index = _index(error.policy_id.removeprefix("policy"))
                loc: list[Any] = ["rules", str(index), "when"] if index is not None else ["rules"]
                errors.append({"loc": loc, "msg": _short(error.error)})
        if errors:
            raise InvalidPolicy(
                "a condition of the policy is not valid Cedar for the schema", extra={"errors": errors}
            )

    def evaluate(self, state: WorkspacePolicy, facts: CallFacts) -> Matches:
        conditions = state.conditions()
        if not any(r.applies_to(facts.tool) for r in conditions):
            return Matches()
        import cedarpy

        compiled = self.compiled(state.workspace, conditions)
        return compiled.matches(cedarpy.is_authorized(self.request(facts), compiled.policies, []))

    def evaluate_batch(self, state: WorkspacePolicy, calls: Sequence[CallFacts]) -> list[Matches]:
        """Many calls against one workspace's conditions in one Cedar call (simulation)."""
        conditions = state.conditions()
        if not calls or not conditions:
            return [Matches() for _ in calls]
        import cedarpy

        compiled = self.compiled(state.workspace, conditions)
        results = cedarpy.is_authorized_batch([self.request(f) for f in calls], compiled.policies, [])
        return [compiled.matches(r) for r in results]

    def request(self, facts: CallFacts) -> dict[str, Any]:
        """The Cedar request for one call (principal: the agent, resource and action: the tool)."""
        types = self._arguments.get(facts.tool, {})
        arguments = {}
        for name, (cedar, _required) in types.items():
            value = _cedar_value(cedar, facts.arguments.get(name))
            if value is not None:
                arguments[name] = value
        at = facts.at
        context: dict[str, Any] = {
            "workspace": facts.workspace,
            "agent": facts.agent,
            "tool": facts.tool,
            "category": facts.category.value,
            "server": facts.server or "",
            "channel": facts.channel,
            "arguments": arguments,
            "requester": {"key": facts.requester_key, "role": facts.requester_role},
            "time": {"epoch": int(at.timestamp()), "hour": at.hour, "weekday": at.isoweekday()},
        }
        if facts.approver is not None:
            approver = facts.approver
            context["approver"] = {
                "key": approver.key,
                "role": approver.role,
                "groups": sorted(approver.groups),
            }
        return {
            "principal": {"type": f"{NAMESPACE}::Agent", "id": facts.agent},
            "action": {"type": f"{NAMESPACE}::Action", "id": facts.tool},
            "resource": {"type": f"{NAMESPACE}::Tool", "id": facts.tool},
            "context": context,
        }

    def compiled(self, workspace: str, rules: Sequence[PolicyRule]) -> CompiledPolicies:
        """The workspace's conditions as a parsed Cedar policy set, parsed once per rule list."""
        key = (workspace, tuple((r.id, r.when, r.tools) for r in rules))
        with self._lock:
            compiled = self._compiled.get(key)
            if compiled is not None:
                self._compiled.move_to_end(key)
                return compiled
        import cedarpy

        text = "\n".join(_policy_text(f"r{i}", r) for i, r in enumerate(rules))
        # Cedar names the policies of a parsed set `policy0`, `policy1`... in the text's order.
        compiled = CompiledPolicies(
            cedarpy.PolicySet.from_str(text), {f"policy{i}": r.id for i, r in enumerate(rules)}
        )
        with self._lock:
            self._compiled[key] = compiled
            while len(self._compiled) > self._max_compiled:
                self._compiled.popitem(last=False)
        return compiled


@dataclass(frozen=True, slots=True)
class CompiledPolicies:
    policies: Any
    ids: Mapping[str, str]
    """Cedar's policy id -> rule id."""

    def matches(self, result: Any) -> Matches:
        held = frozenset(self.ids[p] for p in result.diagnostics.reasons if p in self.ids)
        failed = {m.group(1) for e in result.diagnostics.errors for m in _POLICY_ID.finditer(e)}
        return Matches(held=held, errored=frozenset(self.ids[p] for p in failed if p in self.ids))


def _policy_text(label: str, rule: PolicyRule) -> str:
    if rule.tools:
        actions = ", ".join(f'{NAMESPACE}::Action::"{t}"' for t in rule.tools)
        scope = f"action in [{actions}]"
    else:
        scope = "action"
    condition = rule.when.strip() or "true"
    return f'@id("{label}")\npermit(principal, {scope}, resource)\nwhen {{ {condition}\n}};'


def _index(number: str) -> int | None:
    return int(number) if number.isdigit() else None


_POLICY_ID = re.compile(r"`(policy\d+)`")


def _short(message: str) -> str:
    return message.strip().splitlines()[0][:300] if message.strip() else "invalid"


def _cedar_value(cedar: Mapping[str, Any], value: Any) -> Any:
    """A JSON argument as the Cedar value its type says, or None (left out: `has` is false)."""
    kind = cedar.get("type")
    if value is None:
        return None
    if kind == "Long":
        return (
            value if isinstance(value, int) and not isinstance(value, bool) and abs(value) < 2**63 else None
        )
    if kind == "Boolean":
        return value if isinstance(value, bool) else None
    if kind == "String":
        return value if isinstance(value, str) else None
    if kind == "Extension":
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None
        try:
            number = Decimal(str(value)).quantize(Decimal("0.0001"))
        except InvalidOperation:
            return None
        return {"__extn": {"fn": "decimal", "arg": str(number)}} if abs(number) <= _DECIMAL_LIMIT else None
    if kind == "Set" and isinstance(value, list):
        items = [_cedar_value(cedar["element"], v) for v in value]
        return items if all(i is not None for i in items) else None
    return None
