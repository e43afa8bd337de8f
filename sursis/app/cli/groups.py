"""`sursis groups …`, `sursis delegations …`, `sursis provisioning …` and `sursis pending
reassign`: who decides, from a terminal, over the HTTP API (as `sursis pending` does: the key sent
is the one that acts)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from sursis.app.cli.http import Printer, run_action

if TYPE_CHECKING:
    from sursis.client import AsyncClient
    from sursis.client.models import ApproverGroup, Delegation, ProvisioningRule


def _show_groups(groups: list[ApproverGroup]) -> None:
    for group in groups:
        members = ", ".join(group.members) or "(no members)"
        print(
            f"{group.workspace}/{group.name}: {members}"
            + (f"  — {group.description}" if group.description else "")
        )
    if not groups:
        print("(none)")


def _show_delegations(delegations: list[Delegation]) -> None:
    for d in delegations:
        state = "revoked" if d.revoked_at else "active"
        print(
            f"{d.id}  {d.delegate} votes for {d.delegator}  "
            f"{d.starts_at:%Y-%m-%d %H:%M} → {d.ends_at:%Y-%m-%d %H:%M}  {state}"
        )
    if not delegations:
        print("(none)")


def _show_rules(rules: list[ProvisioningRule]) -> None:
    for rule in rules:
        where = "all workspaces" if rule.workspace is None else rule.workspace
        print(f"{rule.group}: {rule.role} of {where}  ({rule.source})")
    if not rules:
        print("(none)")


def _printer(outcome: Any) -> None:
    from sursis.client.models import ApproverGroup, Delegation, ProvisioningRule

    items = outcome if isinstance(outcome, list) else [outcome]
    if outcome is None:
        print("done")
    elif all(isinstance(i, ApproverGroup) for i in items):
        _show_groups(items)
    elif all(isinstance(i, Delegation) for i in items):
        _show_delegations(items)
    elif all(isinstance(i, ProvisioningRule) for i in items):
        _show_rules(items)
    else:
        print(json.dumps([i.model_dump(mode="json") for i in items], indent=2), file=sys.stdout)


async def _list(client: AsyncClient, args: argparse.Namespace) -> Any:
    return await client.list_groups(workspace=args.workspace)


async def _show(client: AsyncClient, args: argparse.Namespace) -> Any:
    return await client.get_group(args.workspace, args.name)


async def _create(client: AsyncClient, args: argparse.Namespace) -> Any:
    return await client.create_group(
        args.workspace, args.name, members=args.member or [], description=args.description
    )


async def _add(client: AsyncClient, args: argparse.Namespace) -> Any:
    return await client.add_group_member(args.workspace, args.name, args.key_id)


async def _remove(client: AsyncClient, args: argparse.Namespace) -> Any:
    return await client.remove_group_member(args.workspace, args.name, args.key_id)


async def _delete(client: AsyncClient, args: argparse.Namespace) -> Any:
    await client.delete_group(args.workspace, args.name)
    return None


async def _delegate(client: AsyncClient, args: argparse.Namespace) -> Any:
    return await client.create_delegation(
        args.delegate, args.until, starts_at=args.start, delegator=args.delegator
    )


async def _delegations(client: AsyncClient, args: argparse.Namespace) -> Any:
    return await client.list_delegations()


async def _revoke(client: AsyncClient, args: argparse.Namespace) -> Any:
    return await client.revoke_delegation(args.delegation_id)


async def _rules(client: AsyncClient, args: argparse.Namespace) -> Any:
    return await client.list_provisioning_rules()


async def _set_rule(client: AsyncClient, args: argparse.Namespace) -> Any:
    return await client.set_provisioning_rule(args.group, args.role, workspace=args.workspace)


async def _remove_rule(client: AsyncClient, args: argparse.Namespace) -> Any:
    await client.remove_provisioning_rule(args.group)
    return None


async def _reassign(client: AsyncClient, args: argparse.Namespace) -> Any:
    return await client.reassign(args.correlation_id, args.to)


def add_group_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    """Register `sursis groups ...` and `sursis delegations ...` on the top-level subparsers."""
    groups = sub.add_parser("groups", help="approver groups (admins), over the HTTP API")
    groups_sub = groups.add_subparsers(dest="groups_command", required=True)
    listing = groups_sub.add_parser("list", parents=[common], help="the approver groups and their members")
    listing.add_argument("--workspace")
    listing.set_defaults(func=run_action, pending_action=_list, printer=_printer)
    for name, action, help_text in (
        ("show", _show, "one group"),
        ("create", _create, "make a group (members: API key ids)"),
        ("delete", _delete, "delete a group"),
    ):
        parser = groups_sub.add_parser(name, parents=[common], help=help_text)
        parser.add_argument("name")
        parser.add_argument("--workspace", default="default")
        if name == "create":
            parser.add_argument("--member", action="append", metavar="KEY_ID", help="repeatable")
            parser.add_argument("--description")
        parser.set_defaults(func=run_action, pending_action=action, printer=_printer)
    for name, action, help_text in (
        ("add", _add, "add a key to a group"),
        ("remove", _remove, "remove a key"),
    ):
        parser = groups_sub.add_parser(name, parents=[common], help=help_text)
        parser.add_argument("name")
        parser.add_argument("key_id")
        parser.add_argument("--workspace", default="default")
        parser.set_defaults(func=run_action, pending_action=action, printer=_printer)

    delegations = sub.add_parser("delegations", help="name a delegate who votes for you for a period")
    delegations_sub = delegations.add_subparsers(dest="delegations_command", required=True)
    create = delegations_sub.add_parser(
        "create", parents=[common], help="a delegate votes for you until --until"
    )
    create.add_argument("delegate", metavar="DELEGATE_KEY_ID")
    create.add_argument("--until", required=True, help="ISO 8601 with a time zone, at most 90 days ahead")
    create.add_argument("--start", help="ISO 8601 with a time zone (default: now)")
    create.add_argument("--delegator", metavar="KEY_ID", help="admins: for another approver")
    create.set_defaults(func=run_action, pending_action=_delegate, printer=_printer)
    listed = delegations_sub.add_parser("list", parents=[common], help="delegations you gave or received")
    listed.set_defaults(func=run_action, pending_action=_delegations, printer=_printer)
    revoke = delegations_sub.add_parser("revoke", parents=[common], help="end a delegation now")
    revoke.add_argument("delegation_id")
    revoke.set_defaults(func=run_action, pending_action=_revoke, printer=_printer)

    provisioning = sub.add_parser(
        "provisioning", help="which identity-provider groups sign in as which role (admins)"
    )
    provisioning_sub = provisioning.add_subparsers(dest="provisioning_command", required=True)
    rules = provisioning_sub.add_parser("list", parents=[common], help="the rules in force")
    rules.set_defaults(func=run_action, pending_action=_rules, printer=_printer)
    put = provisioning_sub.add_parser("set", parents=[common], help="store a group's rule (audited)")
    put.add_argument("group", help="the provider's group name, without idp:")
    put.add_argument("--role", required=True, choices=["user", "operator", "admin"])
    put.add_argument("--workspace", help="required unless --role admin")
    put.set_defaults(func=run_action, pending_action=_set_rule, printer=_printer)
    remove = provisioning_sub.add_parser("remove", parents=[common], help="remove a group's stored rule")
    remove.add_argument("group")
    remove.set_defaults(func=run_action, pending_action=_remove_rule, printer=_printer)


def add_reassign_command(pending_sub: Any, common: argparse.ArgumentParser, printer: Printer) -> None:
    """Register `sursis pending reassign`; the call it returns is printed as `pending show` does."""
    reassign = pending_sub.add_parser(
        "reassign", parents=[common], help="put a routed call before others (admins)"
    )
    reassign.add_argument("correlation_id")
    reassign.add_argument(
        "--to", action="append", required=True, metavar="TARGET", help="group:NAME or key:KEY_ID"
    )
    reassign.set_defaults(func=run_action, pending_action=_reassign, printer=printer)
