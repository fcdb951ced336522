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

/// An optional RFC 3339 time (`#[serde(default, deserialize_with =
/// "utc_time")]`), taken to UTC as it is read. A time whose offset moves it
/// past what `time` holds (year 9999 at `-23:59` is year 10000 in UTC) is
/// refused here, as bad input, instead of panicking where the database
/// driver takes it to UTC.
pub fn utc_time<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<time::OffsetDateTime>, D::Error> {
    let Some(t) = time::serde::rfc3339::option::deserialize(d)? else {
        return Ok(None);
    };
    t.checked_to_offset(time::UtcOffset::UTC)
        .map(Some)
        .ok_or_else(|| {
            serde::de::Error::custom(format!(
                "{t} is out of range: in UTC it must fall within the years -9999..=9999"
            ))
        })
}
