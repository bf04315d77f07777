//! Pictures in requests: OpenAI's `image_url` content parts and Anthropic's `image` blocks,
//! each holding the picture itself, base64-encoded. A picture behind a URL is refused:
//! Companion never goes to the network.

use base64::Engine as _;
use chat::Picture;

use crate::error::ApiError;

/// The most base64 text a picture may take (its file's limit, × 4/3, rounded up).
const MAX_BASE64_CHARS: usize = chat::picture::MAX_PICTURE_BYTES.div_ceil(3) * 4;

/// An OpenAI `image_url` part's `url`: a `data:image/…;base64,…` URL.
pub(crate) fn from_url(url: &str, at: &str) -> Result<Picture, ApiError> {
    let Some(rest) = url.strip_prefix("data:") else {
        let scheme = url.split(':').next().unwrap_or("");
        return Err(ApiError::unsupported(
            at,
            format!(
                "Companion is offline and fetches nothing: give the picture itself as a `data:image/png;base64,…` URL, not a `{scheme}:` address"
            ),
        ));
    };
    let (header, data) = rest.split_once(',').ok_or_else(|| {
        ApiError::bad_request(format!(
            "`{at}` is a data URL without a `,` before its data"
        ))
    })?;
    let Some(media_type) = header.strip_suffix(";base64") else {
        return Err(ApiError::bad_request(format!(
            "`{at}` must be a base64 data URL (`data:image/png;base64,…`)"
        )));
    };
    from_base64(Some(media_type), data, at)
}

/// A picture's base64 text, with the media type the client says it has (checked against the
/// file's own first bytes).
pub(crate) fn from_base64(
    media_type: Option<&str>,
    data: &str,
    at: &str,
) -> Result<Picture, ApiError> {
    if data.len() > MAX_BASE64_CHARS {
        return Err(ApiError::bad_request(format!(
            "the picture in `{at}` is larger than the {} MB Companion takes",
            chat::picture::MAX_PICTURE_BYTES >> 20
        )));
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data.trim())
        .map_err(|e| ApiError::bad_request(format!("the picture in `{at}` is not base64: {e}")))?;
    let picture = Picture::decode(bytes)
        .map_err(|e| ApiError::bad_request(format!("the picture in `{at}`: {e}")))?;
    if let Some(said) = media_type.filter(|t| !t.is_empty())
        && !said.eq_ignore_ascii_case(picture.media_type())
    {
        return Err(ApiError::bad_request(format!(
            "the picture in `{at}` is said to be {said} but is {}",
            picture.media_type()
        )));
    }
    Ok(picture)
}
