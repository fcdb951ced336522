"""Schemathesis hooks for tests/schemathesis.sh.

A few schema-valid requests are refused for reasons no static document can
state: they name something the service or the tenant does not have (a
profile, a bundle, a policy's route), or break a rule between two fields
(a budget's floor above its ceiling), or a control policy that does not
compile, or a key expiring at a time already past, or a job's `input` holds a NUL (its schema says so only in
words, see hearth-core's `openapi::input`). tests/schemathesis.toml lets those operations answer 422 to valid
data; this check makes sure every such 422 gives one of those reasons and
nothing else, so a validator stricter than the document still fails the run.
"""

import re

import schemathesis

# Operation -> (error codes, `details` fields of `validation_failed`, with the
# message they must carry) that depend on state or on several fields.
STATE_DEPENDENT = {
    # `input` holds no NUL at any depth: a rule only a recursive schema could
    # state, which SDK generators cannot read (the document says it in words).
    "POST /v1/jobs": (
        {"unknown_profile", "unknown_bundle"},
        {"input": "may not contain NUL"},
    ),
    "PUT /v1/admin/tenants/{tenant_id}/budgets/{profile}": (
        {"unknown_profile"},
        {"floor_gpus": "exceeds ceiling_gpus"},
    ),
    "POST /v1/control/events": (
        set(),
        {"route": "unknown route", "input": "takes at most"},
    ),
    "POST /v1/control/sessions": (
        set(),
        {"route": "unknown route", "state": "registers"},
    ),
    "POST /v1/control/policies": ({"invalid_policy"}, {}),
    # Each job of a batch as one job (their fields named `jobs[i].job.<field>`).
    "POST /v1/jobs/batch": (
        set(),
        {"profile": "unknown profile", "code.bundle": "no bundle", "input": "may not contain NUL"},
    ),
    # A key's expiry must be in the future: a time the document cannot pin.
    "POST /v1/keys": (set(), {"expires_at": "must be in the future"}),
    "POST /v1/admin/tenants/{tenant_id}/keys": (set(), {"expires_at": "must be in the future"}),
}

# `[3].route` -> `route`: a field of one event in a batch;
# `jobs[3].job.profile` -> `profile`: a field of one job of a batch.
ITEM = re.compile(r"^(jobs)?\[\d+\]\.(job\.)?")


@schemathesis.check
def refusals_of_valid_data_name_state(ctx, response, case):
    """A 422 to schema-valid data names state or a rule across fields."""
    meta = case.meta
    if meta is None or not meta.generation.mode.is_positive or response.status_code != 422:
        return None
    rule = STATE_DEPENDENT.get(f"{case.method.upper()} {case.path}")
    if rule is None:
        return None
    codes, fields = rule
    body = response.json()
    code = body.get("code")
    if code in codes:
        return None
    details = body.get("details") or []
    if code == "validation_failed" and details and all(
        (want := fields.get(ITEM.sub("", d.get("field", "")))) is not None
        and want in d.get("message", "")
        for d in details
    ):
        return None
    raise AssertionError(
        f"Schema-valid data refused for a reason the document could state: {body}"
    )
