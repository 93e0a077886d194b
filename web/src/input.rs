//! What the keyboard hands over, turned into the bytes mosh expects (MOSH-PROTOCOL.md 7.1).

/// Cursor keys go to mosh-server in their application form `ESC O A..D` whatever the remote
/// DECCKM is: the server translates them back for applications that did not ask for it, and
/// DECCKM is not part of the synchronized state, so the client cannot know it. The page also
/// puts xterm.js into DECCKM for good, as mosh-client does with the local terminal; this
/// translation keeps the rule even if something switched xterm.js back.
pub fn translate_typed(data: &str) -> Vec<u8> {
    let bytes = data.as_bytes();
    if let [0x1b, b'[', k @ b'A'..=b'D'] = bytes {
        return vec![0x1b, b'O', *k];
    }
    bytes.to_vec()
}

/// xterm.js's `onBinary` strings carry one byte per UTF-16 code unit.
pub fn binary_string(data: &str) -> Vec<u8> {
    data.chars().filter_map(|c| u8::try_from(u32::from(c)).ok()).collect()
}
