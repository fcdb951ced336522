//! Rules of the OpenAPI document that hold for every operation, applied once
//! the routes are assembled (see [`super::api`]), so that no handler can
//! forget them: the errors the shared extractors and the router answer with,
//! a description on every response, parameters as the wire carries them,
//! event streams described event by event, security stated on each
//! operation, one-line summaries, and free-form objects typed as such. What
//! SDK generators need of the document (`openapi/generate.sh`) is stated
//! here once. Only the document changes here, never a route.

use utoipa::Modify;
use utoipa::openapi::path::{Operation, Parameter, ParameterIn};
use utoipa::openapi::response::{Response, ResponseBuilder};
use utoipa::openapi::schema::{
    AdditionalProperties, ArrayItems, ObjectBuilder, OneOfBuilder, Ref, SchemaType, Type,
};
use utoipa::openapi::security::SecurityRequirement;
use utoipa::openapi::{ContentBuilder, OpenApi, PathItem, RefOr, Schema};

/// The document-wide rules.
pub struct Contract;

impl Modify for Contract {
    fn modify(&self, openapi: &mut OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        hearth_core::openapi::amend(components);
        let mut streams = false;
        for schema in components.schemas.values_mut() {
            type_free_form(schema);
        }
        let default_security = openapi.security.clone().unwrap_or_default();
        for (path, item) in openapi.paths.paths.iter_mut() {
            for (safe, op) in operations(item) {
                // Each operation states its security: some generators read
                // only the operation's, not the document's default. The
                // tenant API also takes the console's session cookie, which
                // the `session` scheme describes; it is not listed as an
                // alternative on each operation, because SDKs authenticate
                // with the bearer token and a browser sends the cookie by
                // itself (and schemathesis then takes any extra header for
                // an invalid request).
                let security = op.security.get_or_insert_with(|| default_security.clone());
                let secured = requires_auth(security);
                // Changes made with the session cookie need its CSRF token.
                let needs_csrf = secured && !safe && !is_admin(path);
                fix_parameters(path, op);
                add_errors(path, op, secured, needs_csrf);
                describe(op);
                summarize(op);
                type_free_form_in(op);
                streams |= describe_events(op);
            }
        }
        if streams {
            openapi
                .components
                .get_or_insert_with(Default::default)
                .schemas
                .insert(SERVER_SENT_EVENT.to_owned(), server_sent_event().into());
        }
    }
}

/// Each operation of a path, with whether its method is safe (changes
/// nothing: `GET`, `HEAD`, `OPTIONS`, `TRACE`).
fn operations(item: &mut PathItem) -> impl Iterator<Item = (bool, &mut Operation)> {
    [
        (true, &mut item.get),
        (false, &mut item.put),
        (false, &mut item.post),
        (false, &mut item.delete),
        (true, &mut item.options),
        (true, &mut item.head),
        (false, &mut item.patch),
        (true, &mut item.trace),
    ]
    .into_iter()
    .filter_map(|(safe, op)| Some((safe, op.as_mut()?)))
}

fn is_admin(path: &str) -> bool {
    path.starts_with("/v1/admin/") || path == "/v1/admin"
}

/// Whether a list of security requirements asks for credentials (`[{}]`
/// does not).
fn requires_auth(reqs: &[SecurityRequirement]) -> bool {
    !reqs.is_empty() && !reqs.contains(&SecurityRequirement::default())
}

/// Parameters as the wire carries them. utoipa places the fields of an
/// `IntoParams` struct in the path unless told otherwise, and cannot see
/// through Hearth's own `Query` extractor: a parameter the path template does
/// not name is a query parameter. A path, query or header value is never
/// JSON `null`: an optional one is absent instead.
fn fix_parameters(path: &str, op: &mut Operation) {
    for param in op.parameters.iter_mut().flatten() {
        let RefOr::T(param) = param else { continue };
        if matches!(param.parameter_in, ParameterIn::Path)
            && !path.contains(&format!("{{{}}}", param.name))
        {
            param.parameter_in = ParameterIn::Query;
        }
        drop_null(param);
    }
}

fn drop_null(param: &mut Parameter) {
    let Some(RefOr::T(Schema::Object(schema))) = &mut param.schema else {
        return;
    };
    if let SchemaType::Array(types) = &schema.schema_type {
        let kept: Vec<Type> = types
            .iter()
            .filter(|t| **t != Type::Null)
            .cloned()
            .collect();
        schema.schema_type = match kept.as_slice() {
            [one] => SchemaType::Type(one.clone()),
            _ => SchemaType::Array(kept),
        };
    }
}

/// The errors every operation of a kind can answer with, where the
/// operation does not describe them itself.
fn add_errors(path: &str, op: &mut Operation, secured: bool, needs_csrf: bool) {
    let has_params = op.parameters.as_ref().is_some_and(|p| !p.is_empty());
    let has_path_params = path.contains('{');
    let has_body = op.request_body.is_some();
    let admin = is_admin(path);
    let mut add = |status: &str, description: &str| {
        op.responses
            .responses
            .entry(status.to_owned())
            .or_insert_with(|| error_response(description));
    };
    if has_params || has_body {
        add("400", BAD_REQUEST);
    }
    if secured {
        add("401", UNAUTHORIZED);
    }
    if admin {
        add("403", FORBIDDEN);
    }
    if needs_csrf {
        add("403", CSRF);
    }
    if has_path_params {
        add("404", NOT_FOUND);
    }
    if has_body {
        add("413", PAYLOAD_TOO_LARGE);
        add("415", UNSUPPORTED_MEDIA_TYPE);
        add("422", VALIDATION_FAILED);
    }
    add("default", DEFAULT);
}

const BAD_REQUEST: &str =
    "`invalid_request`: a path or query parameter, a header or the body could not be parsed";
const UNAUTHORIZED: &str = "`unauthorized`: missing, unknown, revoked or expired credentials";
const FORBIDDEN: &str = "`forbidden`: the admin API is disabled (no admin token is configured)";
const CSRF: &str = "`csrf`: made with the console's session cookie but without the session's \
`X-CSRF-Token`";
const NOT_FOUND: &str = "`not_found`: no such resource (for this tenant)";
const PAYLOAD_TOO_LARGE: &str = "`payload_too_large`: the body exceeds the configured limit";
const UNSUPPORTED_MEDIA_TYPE: &str = "`unsupported_media_type`: the body is not `application/json`";
const VALIDATION_FAILED: &str =
    "`validation_failed`: well-formed JSON that failed validation (`details` lists the fields)";
const DEFAULT: &str = "Any other error, as an `ErrorBody`: `internal` (500, a bug: logged, never \
described) or `unavailable` (503, the database is unavailable: retry)";

fn error_response(description: &str) -> RefOr<Response> {
    ResponseBuilder::new()
        .description(description)
        .content(
            "application/json",
            ContentBuilder::new()
                .schema(Some(Ref::from_schema_name("ErrorBody")))
                .build(),
        )
        .build()
        .into()
}

/// OpenAPI requires a description on every response; utoipa leaves it out
/// when an annotation gives none.
fn describe(op: &mut Operation) {
    for (status, response) in op.responses.responses.iter_mut() {
        let RefOr::T(response) = response else {
            continue;
        };
        if response.description.is_empty() {
            response.description = default_description(status).to_owned();
        }
    }
}

fn default_description(status: &str) -> &'static str {
    match status {
        "200" => "OK",
        "201" => "Created",
        "202" => "Accepted",
        "204" => "No content",
        "400" => BAD_REQUEST,
        "401" => UNAUTHORIZED,
        "403" => "`forbidden`: these credentials may not do this",
        "404" => NOT_FOUND,
        "409" => "`conflict`: the resource exists, or its state does not allow this",
        "413" => PAYLOAD_TOO_LARGE,
        "415" => UNSUPPORTED_MEDIA_TYPE,
        "422" => VALIDATION_FAILED,
        "503" => "`unavailable`: a dependency (the database) is unavailable; retry",
        _ => "See the response body",
    }
}

/// A summary is one line: the first sentence of the handler's first doc
/// paragraph. The paragraph, when it says more, opens the description; an
/// operation without a description gets its summary as one, so that every
/// operation has both.
fn summarize(op: &mut Operation) {
    let Some(summary) = op.summary.take() else {
        return;
    };
    let paragraph = summary.split_whitespace().collect::<Vec<_>>().join(" ");
    let first = first_sentence(&paragraph);
    let description = op.description.take().filter(|d| !d.trim().is_empty());
    op.description = Some(match description {
        _ if first == paragraph && description.is_none() => paragraph,
        None => summary.trim().to_owned(),
        Some(d) if first == paragraph => d,
        Some(d) => format!("{}\n\n{d}", summary.trim()),
    });
    op.summary = Some(first);
}

/// The first sentence of a paragraph; when that is longer than a line
/// ([`LONG`]), up to its first `:` or `;` instead (a colon introduces the
/// details, which the description keeps), or else up to its first
/// parenthesis (when that leaves a phrase, [`SHORT`]), ended with a `.`.
fn first_sentence(text: &str) -> String {
    let sentence = cut(text, b".", true);
    if sentence.len() <= LONG {
        return sentence.to_owned();
    }
    let mut head = cut(sentence, b":;", false);
    if head.len() > LONG
        && let Some(paren) = head.find(" (")
        && paren >= SHORT
    {
        head = &head[..paren];
    }
    format!("{}.", head.trim_end_matches(['.', ':', ';']))
}

/// A summary longer than this is cut at its first `:` or `;`.
const LONG: usize = 100;

/// What is left of a summary cut at a parenthesis says at least this much
/// (not "A, R_A, F, P*."); else the sentence stays whole.
const SHORT: usize = 24;

/// Up to the first of `stops` (kept) that is followed by a space, outside
/// parentheses and code spans; all of `text` when there is none.
fn cut<'a>(text: &'a str, stops: &[u8], keep: bool) -> &'a str {
    let mut depth = 0i32;
    let mut code = false;
    let bytes = text.as_bytes();
    for (i, b) in bytes.iter().enumerate() {
        match b {
            b'`' => code = !code,
            b'(' if !code => depth += 1,
            b')' if !code => depth -= 1,
            b if !code && depth <= 0 && stops.contains(b) && bytes.get(i + 1) == Some(&b' ') => {
                return &text[..if keep { i + 1 } else { i }];
            }
            _ => {}
        }
    }
    text
}

/// An object schema with neither properties nor `additionalProperties` is
/// a free-form map: say so (`additionalProperties: true`), or generators
/// type it as an object that holds nothing.
fn type_free_form(schema: &mut RefOr<Schema>) {
    let RefOr::T(schema) = schema else { return };
    match schema {
        Schema::Object(object) => {
            let is_object = match &object.schema_type {
                SchemaType::Type(t) => *t == Type::Object,
                SchemaType::Array(types) => types.contains(&Type::Object),
                SchemaType::AnyValue => false,
            };
            if is_object && object.properties.is_empty() && object.additional_properties.is_none() {
                object.additional_properties = Some(Box::new(AdditionalProperties::FreeForm(true)));
            }
            object.properties.values_mut().for_each(type_free_form);
            if let Some(extra) = object.additional_properties.as_deref_mut()
                && let AdditionalProperties::RefOr(extra) = extra
            {
                type_free_form(extra);
            }
        }
        Schema::Array(array) => {
            if let ArrayItems::RefOrSchema(items) = &mut array.items {
                type_free_form(items);
            }
        }
        Schema::OneOf(one_of) => one_of.items.iter_mut().for_each(type_free_form),
        Schema::AllOf(all_of) => all_of.items.iter_mut().for_each(type_free_form),
        Schema::AnyOf(any_of) => any_of.items.iter_mut().for_each(type_free_form),
        _ => {}
    }
}

/// [`type_free_form`] on the schemas an operation declares inline.
fn type_free_form_in(op: &mut Operation) {
    let contents = op
        .request_body
        .iter_mut()
        .filter_map(|body| match body {
            RefOr::T(body) => Some(body),
            RefOr::Ref(_) => None,
        })
        .flat_map(|body| body.content.values_mut())
        .chain(
            op.responses
                .responses
                .values_mut()
                .filter_map(|r| match r {
                    RefOr::T(r) => Some(r),
                    RefOr::Ref(_) => None,
                })
                .flat_map(|r| r.content.values_mut()),
        );
    for content in contents {
        if let RefOr::T(content) = content
            && let Some(schema) = &mut content.schema
        {
            type_free_form(schema);
        }
    }
}

const SERVER_SENT_EVENT: &str = "ServerSentEvent";

/// Before OpenAPI 3.2 (`itemSchema`) an event stream has no standard schema
/// of its items. The schema of a `text/event-stream` body here says what a
/// client holds: the stream's text as it arrives, or, parsed, one event as
/// `ServerSentEvent` describes it (the schema that schemathesis checks each
/// event against). A generator that reads it types the body as either and
/// hands over the text; a schema of one event alone makes generators parse
/// the stream as one JSON object. An operation that documents its stream as
/// a bare string gets the generic event; one that describes its own events
/// keeps them. Whether there was such a stream.
fn describe_events(op: &mut Operation) -> bool {
    let mut found = false;
    for response in op.responses.responses.values_mut() {
        let RefOr::T(response) = response else {
            continue;
        };
        let Some(RefOr::T(content)) = response.content.get_mut("text/event-stream") else {
            continue;
        };
        let bare = matches!(
            &content.schema,
            Some(RefOr::T(Schema::Object(o))) if o.schema_type == SchemaType::Type(Type::String)
        );
        if bare {
            content.schema = Some(
                OneOfBuilder::new()
                    .description(Some(format!(
                        "The stream's text as it arrives, or one event of it, parsed (`{SERVER_SENT_EVENT}`)"
                    )))
                    .item(ObjectBuilder::new().schema_type(Type::String))
                    .item(Ref::from_schema_name(SERVER_SENT_EVENT))
                    .into(),
            );
            found = true;
        }
    }
    found
}

fn server_sent_event() -> Schema {
    let string = |description: &str| {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .description(Some(description))
    };
    ObjectBuilder::new()
        .schema_type(Type::Object)
        .description(Some(
            "One server-sent event: its `event:` name, `id:` and `data:` (the operation says what each event carries)",
        ))
        .property("event", string("The event's name"))
        .property("id", string("The event's id, to resume after it (`Last-Event-ID`)"))
        .property("data", string("The event's data (its `data:` lines joined by newlines)"))
        .property(
            "retry",
            ObjectBuilder::new()
                .schema_type(Type::Integer)
                .minimum(Some(0))
                .description(Some("Reconnection time in milliseconds")),
        )
        .required("data")
        .build()
        .into()
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    fn doc() -> Value {
        serde_json::from_str(&crate::http::openapi_json()).unwrap()
    }

    fn operations(doc: &Value) -> Vec<(String, String, Value)> {
        let mut ops = Vec::new();
        for (path, item) in doc["paths"].as_object().unwrap() {
            for (method, op) in item.as_object().unwrap() {
                ops.push((path.clone(), method.clone(), op.clone()));
            }
        }
        ops
    }

    #[test]
    fn every_response_has_a_description_and_every_error_is_an_error_body() {
        for (path, method, op) in operations(&doc()) {
            let responses = op["responses"].as_object().unwrap();
            assert!(
                responses.contains_key("default"),
                "{method} {path}: no default"
            );
            for (status, r) in responses {
                let what = format!("{method} {path} {status}");
                assert!(
                    r["description"].as_str().is_some_and(|d| !d.is_empty()),
                    "{what}: no description"
                );
                let is_error = status == "default" || status.starts_with('4');
                if is_error {
                    assert_eq!(
                        r["content"]["application/json"]["schema"]["$ref"],
                        "#/components/schemas/ErrorBody",
                        "{what}: not an ErrorBody"
                    );
                }
            }
        }
    }

    #[test]
    fn secured_operations_document_401_and_parameters_sit_where_they_are_read() {
        for (path, method, op) in operations(&doc()) {
            let public = op["security"] == serde_json::json!([{}]);
            // Sign-in is public, and refuses the key in its body with 401.
            let checks_a_key = op["operationId"] == "sign_in";
            assert_eq!(
                op["responses"].get("401").is_some(),
                !public || checks_a_key,
                "{method} {path}: 401 documented on a public operation, or missing on a secured one"
            );
            for p in op["parameters"].as_array().into_iter().flatten() {
                let name = p["name"].as_str().unwrap();
                if p["in"] == "path" {
                    assert!(
                        path.contains(&format!("{{{name}}}")),
                        "{method} {path}: {name}"
                    );
                }
                assert!(
                    !p["schema"]["type"]
                        .as_array()
                        .is_some_and(|t| t.contains(&Value::from("null"))),
                    "{method} {path}: parameter {name} may be null"
                );
            }
        }
    }

    #[test]
    fn every_operation_states_its_security_and_has_a_one_line_summary_and_a_description() {
        for (path, method, op) in operations(&doc()) {
            assert!(
                op["security"].is_array(),
                "{method} {path}: no security of its own"
            );
            let summary = op["summary"].as_str().unwrap_or_default();
            assert!(
                !summary.is_empty() && !summary.contains('\n') && summary.len() <= 160,
                "{method} {path}: summary {summary:?}"
            );
            assert!(
                op["description"].as_str().is_some_and(|d| !d.is_empty()),
                "{method} {path}: no description"
            );
        }
    }

    #[test]
    fn free_form_objects_say_so_and_variants_are_named() {
        fn walk(at: &str, v: &Value) {
            match v {
                Value::Object(map) => {
                    let ty = &map.get("type");
                    let is_object = ty.is_some_and(|t| {
                        t == "object" || t.as_array().is_some_and(|a| a.contains(&"object".into()))
                    });
                    if is_object {
                        assert!(
                            map.contains_key("properties")
                                || map.contains_key("additionalProperties"),
                            "{at}: an object schema that neither lists properties nor allows any"
                        );
                    }
                    for key in ["oneOf", "anyOf"] {
                        for variant in map.get(key).and_then(Value::as_array).into_iter().flatten()
                        {
                            assert!(
                                variant.get("$ref").is_some()
                                    || variant.get("properties").is_none(),
                                "{at}: an inline variant with properties in {key}"
                            );
                        }
                    }
                    for (k, v) in map {
                        walk(&format!("{at}/{k}"), v);
                    }
                }
                Value::Array(items) => {
                    for (i, v) in items.iter().enumerate() {
                        walk(&format!("{at}/{i}"), v);
                    }
                }
                _ => {}
            }
        }
        walk("#", &doc());
    }

    #[test]
    fn first_sentence_skips_parentheses_and_code() {
        assert_eq!(
            super::first_sentence("Posts (e.g. one). Then more."),
            "Posts (e.g. one)."
        );
        assert_eq!(
            super::first_sentence("Uses `a. b` here. More."),
            "Uses `a. b` here."
        );
        assert_eq!(super::first_sentence("No end"), "No end");
    }
}
