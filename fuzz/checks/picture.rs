//! A picture file of any bytes: decoded within its bounds (sides, decoded bytes) and prepared
//! as the vision encoder reads it, or refused; never a panic, never an unbounded allocation.

pub fn check(data: &[u8]) {
    let _ = engine::vision::RgbImage::media_type_of(data);
    let Ok(image) = engine::vision::RgbImage::decode(data) else {
        return;
    };
    // a small square keeps each run fast; the fitting and padding are the same code at 896
    let fitted = image.letterboxed(48);
    assert_eq!((fitted.width, fitted.height), (48, 48));
    let planes = fitted.normalized_planes([0.5; 3], [0.5; 3]);
    assert_eq!(planes.len(), 48 * 48 * 3);
    assert!(planes.iter().all(|x| x.is_finite()));
}
