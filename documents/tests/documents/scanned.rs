//! Documents whose pages are pictures: a scanned PDF (no text layer) gives each page's
//! picture — a JPEG as its file, raw pixels (grey, RGB, CMYK, 1-bit, PNG-predicted) as RGB —
//! and a photo given as the document is its one page. Picture encodings Companion does not
//! decode are refused by name; a document of pictures has no text to stream.

use std::io::Write;
use std::path::Path;

use documents::{Document, PictureData};

use crate::pdf_writer::scanned_pdf;

fn zlib(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

/// The start of a JPEG file: a DCT picture is passed on as the file it is.
const JPEG: &[u8] = b"\xFF\xD8\xFF\xE0\x00\x10JFIF\x00 not decoded here";

#[test]
fn a_scanned_pdf_gives_the_picture_of_each_page() {
    // page 2: 2 × 2 RGB, PNG-predicted ("up" on the second row)
    let rgb = [
        vec![0u8, 10, 20, 30, 40, 50, 60],
        vec![2u8, 1, 1, 1, 2, 2, 2],
    ]
    .concat();
    // page 3: 10 × 1 at 1 bit, inverted by its Decode array
    let bits = [0b1010_0000u8, 0b1100_0000];
    // page 4: 1 × 1 CMYK
    let cmyk = [0u8, 255, 255, 0];
    let bytes = scanned_pdf(&[
        (
            "/Width 800 /Height 1000 /ColorSpace /DeviceRGB /BitsPerComponent 8 /Filter /DCTDecode"
                .into(),
            JPEG.to_vec(),
        ),
        (
            "/Width 2 /Height 2 /ColorSpace /DeviceRGB /BitsPerComponent 8 /Filter /FlateDecode \
             /DecodeParms << /Predictor 15 /Colors 3 /Columns 2 >>"
                .into(),
            zlib(&rgb),
        ),
        (
            "/Width 10 /Height 1 /ColorSpace /DeviceGray /BitsPerComponent 1 /Decode [1 0]".into(),
            bits.to_vec(),
        ),
        (
            "/Width 1 /Height 1 /ColorSpace /DeviceCMYK /BitsPerComponent 8".into(),
            cmyk.to_vec(),
        ),
    ]);
    let doc = Document::from_bytes(Path::new("scan.pdf"), bytes).unwrap();
    let pages = doc.pictures().expect("a document of pictures");
    assert_eq!(
        pages.iter().map(|p| p.page).collect::<Vec<_>>(),
        [1, 2, 3, 4]
    );
    assert_eq!(pages[0].picture, PictureData::File(JPEG.to_vec()));
    assert_eq!(
        pages[1].picture,
        PictureData::Rgb {
            width: 2,
            height: 2,
            pixels: vec![10, 20, 30, 40, 50, 60, 11, 21, 31, 42, 52, 62],
        }
    );
    // 1 is white, 0 black, then inverted: 1010000011 → black white black white …
    let PictureData::Rgb { pixels, .. } = &pages[2].picture else {
        panic!("pixels: {:?}", pages[2].picture);
    };
    let grey: Vec<u8> = pixels.chunks(3).map(|p| p[0]).collect();
    assert_eq!(grey, [0, 255, 0, 255, 255, 255, 255, 255, 0, 0]);
    // cyan-free, full magenta and yellow: red
    assert_eq!(
        pages[3].picture,
        PictureData::Rgb {
            width: 1,
            height: 1,
            pixels: vec![255, 0, 0],
        }
    );
    assert_eq!(doc.format.name(), "pdf");
    let e = doc.text().err().expect("no text to stream");
    assert_eq!(e.code(), "document_no_text");
    assert!(e.to_string().contains("vision projector"), "{e}");
}

#[test]
fn page_pictures_in_encodings_companion_lacks_are_refused_by_name() {
    for (filter, says) in [
        ("/JPXDecode", "JPEG 2000"),
        ("/CCITTFaxDecode", "fax"),
        ("/JBIG2Decode", "fax"),
    ] {
        let bytes = scanned_pdf(&[(
            format!(
                "/Width 8 /Height 8 /ColorSpace /DeviceGray /BitsPerComponent 8 /Filter {filter}"
            ),
            vec![0; 16],
        )]);
        let e = Document::from_bytes(Path::new("scan.pdf"), bytes).unwrap_err();
        assert_eq!(e.code(), "document_no_text", "{filter}");
        let message = e.to_string();
        assert!(message.contains(says), "{filter}: {message}");
        assert_eq!(message.lines().count(), 1);
    }
    // a picture larger than any scan, and one cut short
    let huge = scanned_pdf(&[(
        "/Width 100000 /Height 100000 /ColorSpace /DeviceGray /BitsPerComponent 8".into(),
        vec![0; 16],
    )]);
    assert_eq!(
        Document::from_bytes(Path::new("scan.pdf"), huge)
            .unwrap_err()
            .code(),
        "document_bad_pdf"
    );
    let short = scanned_pdf(&[(
        "/Width 64 /Height 64 /ColorSpace /DeviceRGB /BitsPerComponent 8".into(),
        vec![0; 100],
    )]);
    assert_eq!(
        Document::from_bytes(Path::new("scan.pdf"), short)
            .unwrap_err()
            .code(),
        "document_bad_pdf"
    );
}

#[test]
fn a_photo_is_a_document_of_one_page() {
    let png = b"\x89PNG\r\n\x1a\n and the rest of the file".to_vec();
    for name in ["receipt.png", "receipt"] {
        let doc = Document::from_bytes(Path::new(name), png.clone()).unwrap();
        assert_eq!(doc.format.name(), "picture", "{name}");
        let pages = doc.pictures().expect("one page");
        assert_eq!(pages.len(), 1);
        assert_eq!(pages[0].picture, PictureData::File(png.clone()));
    }
}
