//! OpenAPI schemas of the submission types where the derive cannot say what
//! [`crate::validate`] accepts: maps with constrained keys, a first argument
//! that may not be empty, the variants of [`Code`]. Each mirrors a check of
//! `validate` with the default [`crate::validate::Limits`]; keep them in step.

use std::borrow::Cow;

use utoipa::openapi::extensions::Extensions;
use utoipa::openapi::schema::{
    AdditionalProperties, ArrayBuilder, ObjectBuilder, OneOfBuilder, Ref, Schema, SchemaType, Type,
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
/// program not empty. Said with `not` rather than `prefixItems`, which
/// generators read as a tuple of one (TypeScript's `[string]`).
pub fn command() -> Schema {
    let arg = || text(NO_NUL).max_length(Some(4096));
    let mut not = Extensions::default();
    not.insert(
        "not".to_owned(),
        serde_json::json!({"prefixItems": [{"maxLength": 0}]}),
    );
    ArrayBuilder::new()
        .description(Some(
            "The program and its arguments (1..=64, each at most 4096 characters without NUL; the program not empty)",
        ))
        .items(arg())
        .min_items(Some(1))
        .max_items(Some(64))
        .extensions(Some(not))
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

/// Names of the schemas of [`Code`]'s variants. Each variant is a named
/// component that [`Code`] refers to: generators build a type per named
/// schema, and some cannot tell inline variants apart at run time.
pub const CODE_FILES: &str = "CodeFiles";
/// See [`CODE_FILES`].
pub const CODE_BUNDLE: &str = "CodeBundle";

fn code_variant(field: &str, description: &str, schema: Schema) -> Schema {
    ObjectBuilder::new()
        .schema_type(Type::Object)
        .description(Some(description))
        .property(field, schema)
        .required(field)
        .additional_properties(Some(AdditionalProperties::FreeForm(false)))
        .build()
        .into()
}

fn code_files_schema() -> Schema {
    code_variant("files", "The job's code as inline files", files(0))
}

fn code_bundle_schema() -> Schema {
    code_variant(
        "bundle",
        "The job's code as a bundle uploaded earlier",
        text(BUNDLE_DIGEST)
            .description(Some(
                "`sha256:<hex>` of a bundle uploaded with `POST /v1/bundles`",
            ))
            .into(),
    )
}

impl utoipa::PartialSchema for Code {
    fn schema() -> RefOr<Schema> {
        OneOfBuilder::new()
            .description(Some(
                "The job's code: inline files, or a bundle uploaded earlier.",
            ))
            .item(Ref::from_schema_name(CODE_FILES))
            .item(Ref::from_schema_name(CODE_BUNDLE))
            .into()
    }
}

impl utoipa::ToSchema for Code {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("Code")
    }
}

/// A job's input: any JSON value without NUL, at most 1 MiB. Inline and
/// without a type: SDK generators then type it as any value. The rule that
/// no string or key holds NUL applies at every depth, which only a
/// recursive union could state, and generators cannot build types from
/// one: it is in the description, and the service answers 422 (`input`)
/// when it is broken.
pub fn input() -> RefOr<Schema> {
    ObjectBuilder::new()
        .schema_type(SchemaType::AnyValue)
        .description(Some(
            "Any JSON value, given to the job on stdin and in `$HEARTH_INPUT`: \
             at most 1 MiB, its strings and object keys without NUL (`\\u0000`) at any depth",
        ))
        .build()
        .into()
}

/// Adds what the derive cannot express: the variants of [`Code`], and the constraint between fields of a submission
/// that only a rollout has a `topology`. utoipa has no `if`/`then` beside
/// `properties`, so the keywords travel with the schema's extensions, which
/// it writes out as they are; generators ignore them (a constraint, not a
/// second shape of the type), validators apply them.
pub fn amend(components: &mut Components) {
    components
        .schemas
        .insert(CODE_FILES.to_owned(), code_files_schema().into());
    components
        .schemas
        .insert(CODE_BUNDLE.to_owned(), code_bundle_schema().into());
    if let Some(RefOr::T(Schema::Object(create_job))) = components.schemas.get_mut("CreateJob") {
        let extensions = create_job
            .extensions
            .get_or_insert_with(Extensions::default);
        extensions.insert(
            "if".to_owned(),
            serde_json::json!({
                "required": ["topology"],
                "properties": {"topology": {"not": {"type": "null"}}}
            }),
        );
        extensions.insert(
            "then".to_owned(),
            serde_json::json!({"properties": {"kind": {"const": "rollout"}}}),
        );
    }
}
