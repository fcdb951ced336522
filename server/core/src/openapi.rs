//! OpenAPI schemas of the submission types where the derive cannot say what
//! [`crate::validate`] accepts: maps with constrained keys, a first argument
//! that may not be empty, the variants of [`Code`]. Each mirrors a check of
//! `validate` with the default [`crate::validate::Limits`]; keep them in step.

use std::borrow::Cow;

use utoipa::openapi::extensions::Extensions;
use utoipa::openapi::schema::{
    AdditionalProperties, AnyOfBuilder, ArrayBuilder, ObjectBuilder, OneOfBuilder, Ref, Schema,
    SchemaType, Type,
};
use utoipa::openapi::{Components, RefOr};

use crate::job::Code;

/// A string without NUL (Postgres cannot store one).
pub const NO_NUL: &str = r"^[^\x00]*$";

/// A relative path as `validate::check_path` accepts it: components that are
/// neither empty, `.` nor `..`, without NUL or backslash.
pub const PATH: &str = r"^(?:[^/\x00\\.][^/\x00\\]*|\.[^/\x00\\.][^/\x00\\]*|\.\.[^/\x00\\]+)(?:/(?:[^/\x00\\.][^/\x00\\]*|\.[^/\x00\\.][^/\x00\\]*|\.\.[^/\x00\\]+))*$";

/// A name as `validate::is_name` accepts it (callers, tenants, keys).
pub const NAME: &str = r"^[A-Za-z0-9][A-Za-z0-9._:@/-]*$";

/// A pip requirement as `validate::is_pip_requirement` accepts it.
pub const PIP_REQUIREMENT: &str = r"^[A-Za-z0-9][A-Za-z0-9._\-\[\],=<>!~ ]*$";

/// An environment variable name a job may set.
pub const ENV_NAME: &str = r"^[A-Za-z_][A-Za-z0-9_]*$";

/// A bundle digest as `validate::is_bundle_digest` accepts it.
pub const BUNDLE_DIGEST: &str = "^sha256:[0-9a-f]{64}$";

fn text(pattern: &str) -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .pattern(Some(pattern))
}

/// Code files: relative path -> UTF-8 content, at most 256 files.
pub fn files(min: usize) -> Schema {
    ObjectBuilder::new()
        .schema_type(Type::Object)
        .description(Some(
            "Relative path -> UTF-8 content (without NUL); at most 256 files and 4 MiB in all",
        ))
        .property_names(Some(text(PATH).min_length(Some(1)).max_length(Some(255))))
        .additional_properties(Some(AdditionalProperties::RefOr(RefOr::T(
            text(NO_NUL).build().into(),
        ))))
        .min_properties(Some(min))
        .max_properties(Some(256))
        .build()
        .into()
}

/// `files` of a bundle: at least one file.
pub fn bundle_files() -> Schema {
    files(1)
}

/// A job's command: 1..=64 arguments of at most 4096 characters, the
/// program not empty.
pub fn command() -> Schema {
    let arg = || text(NO_NUL).max_length(Some(4096));
    ArrayBuilder::new()
        .description(Some(
            "The program and its arguments (1..=64, each at most 4096 characters without NUL; the program not empty)",
        ))
        .prefix_items([Schema::from(arg().min_length(Some(1)).build())])
        .items(arg())
        .min_items(Some(1))
        .max_items(Some(64))
        .build()
        .into()
}

/// Extra pip packages: at most 64 requirements.
pub fn pip() -> Schema {
    ArrayBuilder::new()
        .description(Some(
            "Requirements like `name`, `name==1.0` or `name[extra]>=2` (at most 64)",
        ))
        .items(
            text(PIP_REQUIREMENT)
                .min_length(Some(1))
                .max_length(Some(200)),
        )
        .max_items(Some(64))
        .build()
        .into()
}

/// A job's environment: at most 128 variables, 64 KiB in all; names set by
/// Hearth itself are refused.
pub fn env() -> Schema {
    ObjectBuilder::new()
        .schema_type(SchemaType::from_iter([Type::Object, Type::Null]))
        .description(Some(format!(
            "Environment variables (at most 128, 64 KiB in all; values without NUL). \
             Hearth sets {} itself; they may not be given.",
            crate::validate::RESERVED_ENV
                .iter()
                .map(|n| format!("`{n}`"))
                .collect::<Vec<_>>()
                .join(", ")
        )))
        .property_names(Some(text(ENV_NAME).max_length(Some(128))))
        .additional_properties(Some(AdditionalProperties::RefOr(RefOr::T(
            text(NO_NUL).build().into(),
        ))))
        .max_properties(Some(128))
        .build()
        .into()
}

impl utoipa::PartialSchema for Code {
    fn schema() -> RefOr<Schema> {
        let variant = |title: &str, field: &str, schema: Schema| {
            ObjectBuilder::new()
                .schema_type(Type::Object)
                .title(Some(title))
                .property(field, schema)
                .required(field)
                .additional_properties(Some(AdditionalProperties::FreeForm(false)))
        };
        OneOfBuilder::new()
            .description(Some(
                "The job's code: inline files, or a bundle uploaded earlier.",
            ))
            .item(variant("CodeFiles", "files", files(0)))
            .item(variant(
                "CodeBundle",
                "bundle",
                text(BUNDLE_DIGEST)
                    .description(Some(
                        "`sha256:<hex>` of a bundle uploaded with `POST /v1/bundles`",
                    ))
                    .into(),
            ))
            .into()
    }
}

impl utoipa::ToSchema for Code {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("Code")
    }
}

/// Name of the schema of free-form JSON the service stores: any value whose
/// strings and keys hold no NUL (Postgres cannot store one in `jsonb`).
pub const JSON_VALUE: &str = "JsonValue";

/// A reference to [`JSON_VALUE`], for `schema_with`.
pub fn json_value() -> RefOr<Schema> {
    Ref::from_schema_name(JSON_VALUE).into()
}

/// A job's input: any JSON value without NUL, at most 1 MiB.
pub fn input() -> RefOr<Schema> {
    let mut input = Ref::from_schema_name(JSON_VALUE);
    input.description = "Any JSON value, given to the job on stdin and in `$HEARTH_INPUT`: \
        at most 1 MiB, its strings and keys without NUL"
        .to_owned();
    input.into()
}

fn json_value_schema() -> Schema {
    AnyOfBuilder::new()
        .description(Some(
            "Any JSON value whose strings and object keys hold no NUL (`\\u0000`)",
        ))
        .item(ObjectBuilder::new().schema_type(SchemaType::from_iter([
            Type::Null,
            Type::Boolean,
            Type::Number,
        ])))
        .item(text(NO_NUL))
        .item(ArrayBuilder::new().items(json_value()))
        .item(
            ObjectBuilder::new()
                .schema_type(Type::Object)
                .property_names(Some(text(NO_NUL)))
                .additional_properties(Some(AdditionalProperties::RefOr(json_value()))),
        )
        .build()
        .into()
}

/// Adds what the derive cannot express: the [`JSON_VALUE`] schema, and the
/// constraint between fields of a submission that only a rollout has a
/// `topology` (utoipa has no `anyOf` beside `properties`, so the keyword
/// travels with the schema's extensions, which it writes out as they are).
pub fn amend(components: &mut Components) {
    components
        .schemas
        .insert(JSON_VALUE.to_owned(), json_value_schema().into());
    if let Some(RefOr::T(Schema::Object(create_job))) = components.schemas.get_mut("CreateJob") {
        let any_of = serde_json::json!([
            {"properties": {"kind": {"const": "rollout"}}},
            {"properties": {"topology": {"type": "null"}}}
        ]);
        create_job
            .extensions
            .get_or_insert_with(Extensions::default)
            .insert("anyOf".to_owned(), any_of);
    }
}
