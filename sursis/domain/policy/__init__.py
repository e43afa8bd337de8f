"""The policy decision point and what it reads: a workspace's policy (ordered rules with Cedar
conditions), its autonomy ladder, the `sampled` rung, pre-approvals, the caches that spare a call's
decision any read, and the replays of a proposed policy (its decisions and its reviewers' answers)
over a past period.

Its modules are imported here; the names they define are imported from the module
that defines them (`sursis.domain.policy.<module>`). See README.md."""

from sursis.domain.policy import (
    authorization_cache,
    authorizations,
    policies,
    policy_cache,
    policy_ports,
    policy_sampling,
    policy_service,
    policy_simulation,
)

__all__ = [
    "authorization_cache",
    "authorizations",
    "policies",
    "policy_cache",
    "policy_ports",
    "policy_sampling",
    "policy_service",
    "policy_simulation",
]
