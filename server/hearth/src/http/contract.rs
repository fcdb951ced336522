//! Rules of the OpenAPI document that hold for every operation, applied once
//! the routes are assembled (see [`super::api`]), so that no handler can
//! forget them: the errors the shared extractors and the router answer with,
//! a description on every response, parameters as the wire carries them,
//! and event streams described event by event. Only the document changes
//! here, never a route.

use utoipa::Modify;
use utoipa::openapi::path::{Operation, Parameter, ParameterIn};
use utoipa::openapi::response::{Response, ResponseBuilder};
use utoipa::openapi::schema::{ObjectBuilder, Ref, SchemaType, Type};
use utoipa::openapi::security::SecurityRequirement;
use utoipa::openapi::{ContentBuilder, OpenApi, PathItem, RefOr, Schema};

/// The document-wide rules.
pub struct Contract;

impl Modify for Contract {
    fn modify(&self, openapi: &mut OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        hearth_core::openapi::amend(components);
        let mut streams = false;
        let secured_by_default = openapi
            .security
            .as_ref()
            .is_some_and(|reqs| requires_auth(reqs));
        for (path, item) in openapi.paths.paths.iter_mut() {
            for op in operations(item) {
                let secured = op
                    .security
                    .as_ref()
                    .map_or(secured_by_default, |reqs| requires_auth(reqs));
                fix_parameters(path, op);
                add_errors(path, op, secured);
                describe(op);
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

fn operations(item: &mut PathItem) -> impl Iterator<Item = &mut Operation> {
    [
        &mut item.get,
        &mut item.put,
        &mut item.post,
        &mut item.delete,
        &mut item.options,
        &mut item.head,
        &mut item.patch,
        &mut item.trace,
    ]
    .into_iter()
    .filter_map(Option::as_mut)
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
fn add_errors(path: &str, op: &mut Operation, secured: bool) {
    let has_params = op.parameters.as_ref().is_some_and(|p| !p.is_empty());
    let has_path_params = path.contains('{');
    let has_body = op.request_body.is_some();
    let admin = path.starts_with("/v1/admin/") || path == "/v1/admin";
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

const SERVER_SENT_EVENT: &str = "ServerSentEvent";

/// Before OpenAPI 3.2 (`itemSchema`), the schema of a `text/event-stream`
/// response describes one event, as a client's parser reads it. An
/// operation that documents its stream as a bare string gets the generic
/// event; one that describes its own events keeps them. Whether there was
/// such a stream.
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
            content.schema = Some(Ref::from_schema_name(SERVER_SENT_EVENT).into());
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
            assert_eq!(
                op["responses"].get("401").is_some(),
                !public,
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
}
