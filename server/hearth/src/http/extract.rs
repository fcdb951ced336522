//! Extractors whose rejections are API errors (`{"code", "message"}`), never
//! axum's plain-text ones.

use axum::extract::{FromRequest, FromRequestParts};

use crate::error::ApiError;

/// JSON body.
#[derive(Debug, FromRequest)]
#[from_request(via(axum::Json), rejection(ApiError))]
pub struct Json<T>(pub T);

/// Query string.
#[derive(Debug, FromRequestParts)]
#[from_request(via(axum::extract::Query), rejection(ApiError))]
pub struct Query<T>(pub T);

/// Path parameters.
#[derive(Debug, FromRequestParts)]
#[from_request(via(axum::extract::Path), rejection(ApiError))]
pub struct Path<T>(pub T);

impl<T: serde::Serialize> axum::response::IntoResponse for Json<T> {
    fn into_response(self) -> axum::response::Response {
        axum::Json(self.0).into_response()
    }
}

/// Deserializes `T` only from a JSON object: serde's derive also takes an
/// array of the fields in order (`["a", null]`), which no documented
/// request body allows. For a hand-written `Deserialize` of a request body.
pub fn from_object<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::de::DeserializeOwned,
{
    use serde::Deserialize;
    let object = serde_json::Map::<String, serde_json::Value>::deserialize(d)?;
    T::deserialize(serde_json::Value::Object(object)).map_err(serde::de::Error::custom)
}
