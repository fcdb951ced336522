//! The control policy language as JSON Schema for the OpenAPI document:
//! named schemas for the policy, a route, each instruction shape, operands,
//! conditions and the decision, with every limit of `hearth_control::policy`
//! (register and input indices, body length, routes, steps) and u32 values as
//! `integer` in `0..=4294967295`. The semantics of each op are in the README
//! ("Control policy language"); the names and limits here are taken from
//! `hearth_control::policy`, so they cannot drift from what the service
//! accepts. Describes only; validation stays `Program::compile`'s.

use std::borrow::Cow;

use hearth_control::policy::{
    BinOp, Cmp, MAX_BODY, MAX_EFFECT_VALUES, MAX_INPUTS, MAX_NAME, MAX_REGISTERS, MAX_ROUTES,
    MAX_STEPS, Reduce,
};
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{
    AdditionalProperties, ArrayBuilder, Discriminator, ObjectBuilder, OneOfBuilder, Ref, Schema,
    SchemaType, Type,
};

/// Name of the policy body's schema.
pub const POLICY: &str = "ControlPolicy";
const ROUTE: &str = "ControlRoute";
const INSTRUCTION: &str = "ControlInstruction";
const ARITHMETIC: &str = "ControlArithmeticInstruction";
const SELECT: &str = "ControlSelectInstruction";
const SET_ROUTE: &str = "ControlSetRouteInstruction";
const EMIT: &str = "ControlEmitInstruction";
const OPERAND: &str = "ControlOperand";
const REG: &str = "ControlRegOperand";
const INPUT: &str = "ControlInputOperand";
const IMM: &str = "ControlImmOperand";
const CONDITION: &str = "ControlCondition";
const CMP: &str = "ControlCmp";
const DECISION: &str = "ControlDecision";
const PER_EVENT: &str = "ControlPerEventDecision";
const BATCH: &str = "ControlBatchDecision";
const REDUCE: &str = "ControlReduce";

/// A policy or route name.
pub const NAME_PATTERN: &str = "^[A-Za-z0-9_.-]{1,64}$";

fn reference(name: &str) -> RefOr<Schema> {
    Ref::from_schema_name(name).into()
}

/// The schema `name`, or null: the same as leaving the field out.
fn nullable(name: &str) -> OneOfBuilder {
    OneOfBuilder::new()
        .item(reference(name))
        .item(ObjectBuilder::new().schema_type(Type::Null))
}

fn integer(min: u64, max: u64) -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(Type::Integer)
        .minimum(Some(min))
        .maximum(Some(max))
}

/// A u32: `integer`, `0..=4294967295`.
pub fn u32_value() -> ObjectBuilder {
    integer(0, u64::from(u32::MAX))
}

/// A u32 as a schema, for `schema_with`.
pub fn u32_schema() -> Schema {
    u32_value().build().into()
}

fn words(max_items: usize, description: &str) -> ArrayBuilder {
    ArrayBuilder::new()
        .items(u32_value())
        .max_items(Some(max_items))
        .description(Some(description))
}

/// Registers of a session (u32 each), for `schema_with`.
pub fn registers() -> Schema {
    words(MAX_REGISTERS, "u32 registers, `0..=4294967295` each").into()
}

/// Registers of a session or null, for `schema_with`.
pub fn registers_or_null() -> Schema {
    words(MAX_REGISTERS, "u32 registers, `0..=4294967295` each")
        .schema_type(SchemaType::from_iter([Type::Array, Type::Null]))
        .into()
}

/// An event's input words (u32 each), for `schema_with`.
pub fn input_words() -> Schema {
    words(MAX_INPUTS, "u32 input words, `0..=4294967295` each").into()
}

/// An effect's values (u32 each), for `schema_with`.
pub fn effect_values() -> Schema {
    words(MAX_EFFECT_VALUES, "the reported registers' u32 values").into()
}

/// A reference to the policy schema, for `schema_with`.
pub fn policy_ref() -> RefOr<Schema> {
    reference(POLICY)
}

fn wire_name<T: serde::Serialize>(v: T) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// The `op` names of the two-operand instructions, in opcode order.
pub fn binary_ops() -> Vec<String> {
    BinOp::ALL.iter().map(|&op| wire_name(op)).collect()
}

fn object(description: &str) -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(Type::Object)
        .description(Some(description))
        .additional_properties(Some(AdditionalProperties::FreeForm(false)))
}

fn op_tag(values: Vec<String>) -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(values))
}

fn register_index(what: &str) -> ObjectBuilder {
    integer(0, MAX_REGISTERS as u64 - 1).description(Some(format!(
        "{what}: a register index, below the policy's `registers` (at most {})",
        MAX_REGISTERS - 1
    )))
}

fn name(description: &str) -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .pattern(Some(NAME_PATTERN))
        .min_length(Some(1))
        .max_length(Some(MAX_NAME))
        .description(Some(description))
}

fn policy() -> Schema {
    object(
        "A control policy: a deterministic transition over a session of u32 registers, \
         run per event as a chain of at most `max_steps` steps of straight-line route \
         bodies. Semantics of each op: README, \"Control policy language\".",
    )
    .property("name", name("Policy name"))
    .required("name")
    .property(
        "version",
        u32_value().description(Some(
            "Version; a new version is a new immutable policy with new route ids",
        )),
    )
    .required("version")
    .property(
        "registers",
        integer(1, MAX_REGISTERS as u64).description(Some("u32 registers of the session state")),
    )
    .required("registers")
    .property(
        "inputs",
        integer(0, MAX_INPUTS as u64)
            .default(Some(0.into()))
            .description(Some("u32 input words an event may carry")),
    )
    .property(
        "init",
        words(
            MAX_REGISTERS,
            "Registers of a new session (at most `registers` values; the rest 0)",
        )
        .default(Some(serde_json::json!([]))),
    )
    .property(
        "max_steps",
        integer(1, u64::from(MAX_STEPS))
            .default(Some(1.into()))
            .description(Some("H: most observation-free steps one event runs")),
    )
    .property(
        "routes",
        ArrayBuilder::new()
            .items(reference(ROUTE))
            .min_items(Some(1))
            .max_items(Some(MAX_ROUTES))
            .description(Some(
                "Routes, names unique; a new session starts on the first",
            )),
    )
    .required("routes")
    .property("decision", nullable(DECISION))
    .property(
        "durability",
        op_tag(vec!["commit".to_owned(), "snapshot".to_owned()])
            .default(Some("commit".into()))
            .description(Some(
                "When an event is answered. `commit` (default): only once the session \
                 state it produced is committed to Postgres (commits grouped per batch \
                 launch); a crash loses no answered event. `snapshot`: as soon as it ran; \
                 state is written every `HEARTH_CONTROL_SNAPSHOT_S` seconds and at \
                 shutdown, so a crash loses the answered events of up to the last \
                 snapshot interval. Not part of the route ids.",
            )),
    )
    .build()
    .into()
}

fn route() -> Schema {
    object("One route: a name and a straight-line body, run once per step")
        .property("name", name("Route name, unique in the policy"))
        .required("name")
        .property(
            "body",
            ArrayBuilder::new()
                .items(reference(INSTRUCTION))
                .max_items(Some(MAX_BODY))
                .description(Some(
                    "Instructions, in order; each sees the effects of the ones before it",
                )),
        )
        .required("body")
        .build()
        .into()
}

fn instruction() -> Schema {
    let mut mapping: Vec<(String, String)> = binary_ops()
        .into_iter()
        .map(|op| (op, format!("#/components/schemas/{ARITHMETIC}")))
        .collect();
    for (op, schema) in [("select", SELECT), ("set_route", SET_ROUTE), ("emit", EMIT)] {
        mapping.push((op.to_owned(), format!("#/components/schemas/{schema}")));
    }
    OneOfBuilder::new()
        .description(Some("One instruction, tagged by `op`"))
        .item(reference(ARITHMETIC))
        .item(reference(SELECT))
        .item(reference(SET_ROUTE))
        .item(reference(EMIT))
        .discriminator(Some(Discriminator::with_mapping("op", mapping)))
        .into()
}

fn arithmetic() -> Schema {
    object(
        "`dst = op(a, b)`: add, sub, mul wrap mod 2^32; add_sat, sub_sat, mul_sat \
         saturate at 0 and 4294967295; xor, and, or are bitwise; rotl, rotr rotate `a` \
         by `b mod 32`; mix is murmur3's fmix32 of `a ^ (b * 0x9E3779B9 mod 2^32)`",
    )
    .property("op", op_tag(binary_ops()))
    .required("op")
    .property("dst", register_index("Destination"))
    .required("dst")
    .property("a", reference(OPERAND))
    .required("a")
    .property("b", reference(OPERAND))
    .required("b")
    .build()
    .into()
}

fn select() -> Schema {
    object("`dst = cmp(a, b) ? then : else` (unsigned comparison)")
        .property("op", op_tag(vec!["select".to_owned()]))
        .required("op")
        .property("dst", register_index("Destination"))
        .required("dst")
        .property("cmp", reference(CMP))
        .required("cmp")
        .property("a", reference(OPERAND))
        .required("a")
        .property("b", reference(OPERAND))
        .required("b")
        .property("then", reference(OPERAND))
        .required("then")
        .property("else", reference(OPERAND))
        .required("else")
        .build()
        .into()
}

fn set_route() -> Schema {
    object(
        "If `when` holds (always when absent), the session's next route becomes `route`; \
         when several fire in one step, the last to fire wins",
    )
    .property("op", op_tag(vec!["set_route".to_owned()]))
    .required("op")
    .property("route", name("A route of this policy, by name"))
    .required("route")
    .property("when", nullable(CONDITION))
    .build()
    .into()
}

fn emit() -> Schema {
    object(
        "If `when` holds (always when absent), the step's effect becomes `{code, values}` \
         with the listed registers' values at this point; a later `emit` that fires \
         replaces it. An effect ends the event's chain after this step",
    )
    .property("op", op_tag(vec!["emit".to_owned()]))
    .required("op")
    .property("code", u32_value().description(Some("Effect code")))
    .required("code")
    .property(
        "regs",
        ArrayBuilder::new()
            .items(register_index("Reported register"))
            .max_items(Some(MAX_EFFECT_VALUES))
            .default(Some(serde_json::json!([])))
            .description(Some("Registers whose values the effect reports")),
    )
    .property("when", nullable(CONDITION))
    .build()
    .into()
}

fn operand() -> Schema {
    OneOfBuilder::new()
        .description(Some(
            "An operand: a register, an input word or a u32 constant",
        ))
        .item(reference(REG))
        .item(reference(INPUT))
        .item(reference(IMM))
        .into()
}

fn single(description: &str, field: &str, value: ObjectBuilder) -> Schema {
    object(description)
        .property(field, value)
        .required(field)
        .build()
        .into()
}

fn condition() -> Schema {
    object("`cmp(a, b)`, unsigned")
        .property("cmp", reference(CMP))
        .required("cmp")
        .property("a", reference(OPERAND))
        .required("a")
        .property("b", reference(OPERAND))
        .required("b")
        .build()
        .into()
}

fn cmp() -> Schema {
    let all = [Cmp::Eq, Cmp::Ne, Cmp::Lt, Cmp::Le, Cmp::Gt, Cmp::Ge];
    op_tag(all.iter().map(|&c| wire_name(c)).collect())
        .description(Some(
            "Unsigned comparison: eq `==`, ne `!=`, lt `<`, le `<=`, gt `>`, ge `>=`",
        ))
        .build()
        .into()
}

fn decision() -> Schema {
    OneOfBuilder::new()
        .description(Some(
            "When a chain continues after a step that emitted no effect and is below \
             `max_steps`; absent: always",
        ))
        .item(reference(PER_EVENT))
        .item(reference(BATCH))
        .into()
}

fn batch_decision() -> Schema {
    let batch = object(
        "Every event of the batch still running continues iff \
         `cmp(reduce(register reg over them), value)`",
    )
    .property("reduce", reference(REDUCE))
    .required("reduce")
    .property("reg", register_index("Reduced register"))
    .required("reg")
    .property("cmp", reference(CMP))
    .required("cmp")
    .property("value", u32_value())
    .required("value")
    .build();
    object("A batch-wide decision")
        .property("batch", batch)
        .required("batch")
        .build()
        .into()
}

fn reduce() -> Schema {
    let all = [
        Reduce::Min,
        Reduce::Max,
        Reduce::Sum,
        Reduce::Any,
        Reduce::All,
    ];
    op_tag(all.iter().map(|&r| wire_name(r)).collect())
        .description(Some(
            "min, max, sum (wrapping mod 2^32), any (1 if some value is non-zero, else 0), \
             all (1 if every value is non-zero, else 0)",
        ))
        .build()
        .into()
}

/// Every named schema of the policy language.
pub fn schemas() -> Vec<(String, RefOr<Schema>)> {
    let s = |name: &str, schema: Schema| (name.to_owned(), RefOr::T(schema));
    vec![
        s(POLICY, policy()),
        s(ROUTE, route()),
        s(INSTRUCTION, instruction()),
        s(ARITHMETIC, arithmetic()),
        s(SELECT, select()),
        s(SET_ROUTE, set_route()),
        s(EMIT, emit()),
        s(OPERAND, operand()),
        s(
            REG,
            single(
                "Register `reg` of the session",
                "reg",
                register_index("Register"),
            ),
        ),
        s(
            INPUT,
            single(
                "Input word `input` of the event (missing words read 0)",
                "input",
                integer(0, MAX_INPUTS as u64 - 1)
                    .description(Some("An input index, below the policy's `inputs`")),
            ),
        ),
        s(IMM, single("A constant", "imm", u32_value())),
        s(CONDITION, condition()),
        s(CMP, cmp()),
        s(DECISION, decision()),
        s(
            PER_EVENT,
            object("Each event continues iff the condition holds on its own registers")
                .property("per_event", reference(CONDITION))
                .required("per_event")
                .build()
                .into(),
        ),
        s(BATCH, batch_decision()),
        s(REDUCE, reduce()),
    ]
}

/// The request body of `create_policy`: a [`POLICY`] (see [`schemas`]).
#[derive(Debug)]
pub struct PolicyBody;

impl utoipa::PartialSchema for PolicyBody {
    fn schema() -> RefOr<Schema> {
        policy().into()
    }
}

impl utoipa::ToSchema for PolicyBody {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed(POLICY)
    }

    fn schemas(out: &mut Vec<(String, RefOr<Schema>)>) {
        out.extend(schemas().into_iter().filter(|(n, _)| n != POLICY));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(schema: &RefOr<Schema>) -> serde_json::Value {
        serde_json::to_value(schema).unwrap()
    }

    fn named(name: &str) -> serde_json::Value {
        let all = schemas();
        json(&all.iter().find(|(n, _)| n == name).unwrap().1)
    }

    #[test]
    fn every_op_of_the_language_has_a_schema() {
        let ops = binary_ops();
        assert_eq!(ops.len(), BinOp::ALL.len());
        assert!(ops.contains(&"add_sat".to_owned()) && ops.contains(&"mix".to_owned()));
        let arithmetic = named(ARITHMETIC);
        assert_eq!(
            arithmetic["properties"]["op"]["enum"],
            serde_json::json!(ops)
        );
        let mapping = &named(INSTRUCTION)["discriminator"]["mapping"];
        for op in ops
            .iter()
            .map(String::as_str)
            .chain(["select", "set_route", "emit"])
        {
            assert!(mapping.get(op).is_some(), "{op} unmapped: {mapping}");
        }
        // Each instruction shape parses as the language's instruction.
        for (op, extra) in [
            (
                "add",
                serde_json::json!({"dst": 0, "a": {"reg": 0}, "b": {"imm": 4294967295u32}}),
            ),
            (
                "select",
                serde_json::json!({"dst": 1, "cmp": "le", "a": {"input": 0}, "b": {"imm": 1}, "then": {"imm": 2}, "else": {"reg": 0}}),
            ),
            (
                "set_route",
                serde_json::json!({"route": "a", "when": {"cmp": "eq", "a": {"reg": 0}, "b": {"imm": 0}}}),
            ),
            ("emit", serde_json::json!({"code": 1, "regs": [0, 1]})),
        ] {
            let mut v = extra;
            v["op"] = op.into();
            serde_json::from_value::<hearth_control::policy::Instr>(v.clone()).unwrap();
            let required = match op {
                "add" => named(ARITHMETIC),
                "select" => named(SELECT),
                "set_route" => named(SET_ROUTE),
                _ => named(EMIT),
            }["required"]
                .clone();
            for r in required.as_array().unwrap() {
                assert!(v.get(r.as_str().unwrap()).is_some(), "{op} needs {r}");
            }
        }
    }

    #[test]
    fn u32_values_are_integers_up_to_u32_max_and_limits_are_the_languages() {
        let imm = named(IMM);
        assert_eq!(imm["properties"]["imm"]["type"], "integer");
        assert_eq!(imm["properties"]["imm"]["minimum"], 0);
        assert_eq!(imm["properties"]["imm"]["maximum"], 4_294_967_295u64);
        assert!(imm["properties"]["imm"].get("format").is_none());
        let policy = json(&<PolicyBody as utoipa::PartialSchema>::schema());
        assert_eq!(policy["properties"]["registers"]["maximum"], MAX_REGISTERS);
        assert_eq!(policy["properties"]["routes"]["maxItems"], MAX_ROUTES);
        assert_eq!(policy["properties"]["max_steps"]["maximum"], MAX_STEPS);
        assert_eq!(named(ROUTE)["properties"]["body"]["maxItems"], MAX_BODY);
        assert_eq!(policy["additionalProperties"], false);
        let words = serde_json::to_value(registers()).unwrap();
        assert_eq!(words["items"]["maximum"], 4_294_967_295u64);
    }
}
