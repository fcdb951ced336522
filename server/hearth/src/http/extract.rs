//! Extractors whose rejections are API errors (`{"code", "message"}`), never
//! axum's plain-text ones.

use axum::extract::{FromRequest, FromRequestParts};

use crate::error::ApiError;

/// JSON body, as sent: a body in a content coding (`Content-Encoding: gzip`)
/// is refused (415), not read as if it were plain JSON.
#[derive(Debug)]
pub struct Json<T>(pub T);

impl<T, S> FromRequest<S> for Json<T>
where
    axum::Json<T>: FromRequest<S, Rejection = axum::extract::rejection::JsonRejection>,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: axum::extract::Request, state: &S) -> Result<Self, ApiError> {
        if let Some(coding) = req.headers().get(axum::http::header::CONTENT_ENCODING)
            && !coding.as_bytes().eq_ignore_ascii_case(b"identity")
        {
            return Err(ApiError::UnsupportedMediaType(
                "the body must not be in a content coding (`Content-Encoding`): send plain JSON"
                    .into(),
            ));
        }
        let axum::Json(value) = axum::Json::<T>::from_request(req, state).await?;
        Ok(Json(value))
    }
}

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
