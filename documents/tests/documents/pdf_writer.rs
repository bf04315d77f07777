//! A PDF writer for tests: objects as given, numbered from 1, with a valid cross-reference
//! table. Shared by the documents tests and the end-to-end tests (`tests/`, by `#[path]`).

/// A PDF of the given objects (numbered from 1; the first is the catalog) with a valid xref.
pub fn pdf(objects: &[Vec<u8>]) -> Vec<u8> {
    let mut out = b"%PDF-1.5\n".to_vec();
    let mut offsets = vec![];
    for (i, body) in objects.iter().enumerate() {
        offsets.push(out.len());
        out.extend_from_slice(format!("{} 0 obj\n", i + 1).as_bytes());
        out.extend_from_slice(body);
        out.extend_from_slice(b"\nendobj\n");
    }
    let xref = out.len();
    out.extend_from_slice(
        format!("xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1).as_bytes(),
    );
    for o in offsets {
        out.extend_from_slice(format!("{o:010} 00000 n \n").as_bytes());
    }
    out.extend_from_slice(
        format!(
            "trailer\n<< /Size {} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n",
            objects.len() + 1
        )
        .as_bytes(),
    );
    out
}

pub fn stream(dict: &str, data: &[u8]) -> Vec<u8> {
    let mut v = format!("<< {dict} /Length {} >>\nstream\n", data.len()).into_bytes();
    v.extend_from_slice(data);
    v.extend_from_slice(b"\nendstream");
    v
}

/// A PDF whose pages each draw one picture over the whole page and hold no text, as a
/// scanner writes them. `pictures`: each page's image dictionary entries (beyond its type and
/// length: `/Width … /Height … /ColorSpace … /BitsPerComponent … /Filter …`) and its data.
pub fn scanned_pdf(pictures: &[(String, Vec<u8>)]) -> Vec<u8> {
    // 1 the catalog, 2 the page tree, then for each page: the page, its content, its picture
    let kids: Vec<String> = (0..pictures.len())
        .map(|i| format!("{} 0 R", 3 + 3 * i))
        .collect();
    let mut objects = vec![
        b"<< /Type /Catalog /Pages 2 0 R >>".to_vec(),
        format!(
            "<< /Type /Pages /Kids [{}] /Count {} >>",
            kids.join(" "),
            pictures.len()
        )
        .into_bytes(),
    ];
    for (i, (dict, data)) in pictures.iter().enumerate() {
        let (content, image) = (4 + 3 * i, 5 + 3 * i);
        objects.push(
            format!(
                "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {content} 0 R \
                 /Resources << /XObject << /Im0 {image} 0 R >> >> >>"
            )
            .into_bytes(),
        );
        objects.push(stream("", b"q 612 0 0 792 0 0 cm /Im0 Do Q"));
        objects.push(stream(
            &format!("/Type /XObject /Subtype /Image {dict}"),
            data,
        ));
    }
    pdf(&objects)
}
