//! A minimal git pack writer: whole objects (no deltas), zlib "stored" (uncompressed)
//! blocks. Fast to produce and simple enough to read in one sitting; libgit2 indexes it.

use std::io::{self, BufWriter, Write};

use sha1::{Digest, Sha1};

/// Largest payload of one stored deflate block.
const STORED_BLOCK: usize = 65_535;

/// Writes a version-2 pack of exactly the announced number of objects.
pub(crate) struct PackWriter<W: Write> {
    out: BufWriter<W>,
    hasher: Sha1,
    remaining: usize,
}

impl<W: Write> PackWriter<W> {
    /// Starts a pack that will hold `count` objects.
    pub(crate) fn new(out: W, count: usize) -> io::Result<PackWriter<W>> {
        let count = u32::try_from(count)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "too many objects"))?;
        let mut writer = PackWriter {
            out: BufWriter::with_capacity(1 << 20, out),
            hasher: Sha1::new(),
            remaining: count as usize,
        };
        writer.put(b"PACK")?;
        writer.put(&2u32.to_be_bytes())?;
        writer.put(&count.to_be_bytes())?;
        Ok(writer)
    }

    /// Appends one whole object.
    pub(crate) fn object(&mut self, kind: git2::ObjectType, data: &[u8]) -> io::Result<()> {
        if self.remaining == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "more objects than announced",
            ));
        }
        self.remaining -= 1;
        let type_code: u8 = match kind {
            git2::ObjectType::Commit => 1,
            git2::ObjectType::Tree => 2,
            git2::ObjectType::Blob => 3,
            git2::ObjectType::Tag => 4,
            _ => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "only commits, trees, blobs and tags go into a pack",
                ));
            }
        };
        self.put(&object_header(type_code, data.len()))?;
        // zlib header: deflate, 32 KiB window, no dictionary, check bits valid.
        self.put(&[0x78, 0x01])?;
        let mut chunks = data.chunks(STORED_BLOCK).peekable();
        if data.is_empty() {
            self.put(&[0x01, 0x00, 0x00, 0xff, 0xff])?;
        }
        while let Some(chunk) = chunks.next() {
            let last = u8::from(chunks.peek().is_none());
            // A chunk is at most STORED_BLOCK (65,535) bytes, so it fits in u16.
            let len = u16::try_from(chunk.len()).unwrap_or(u16::MAX);
            let mut header = [last, 0, 0, 0, 0];
            header[1..3].copy_from_slice(&len.to_le_bytes());
            header[3..5].copy_from_slice(&(!len).to_le_bytes());
            self.put(&header)?;
            self.put(chunk)?;
        }
        self.put(&adler32(data).to_be_bytes())?;
        Ok(())
    }

    /// Writes the trailing checksum and hands back the underlying writer.
    pub(crate) fn finish(mut self) -> io::Result<W> {
        if self.remaining != 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "fewer objects than announced",
            ));
        }
        let digest = self.hasher.finalize();
        self.out.write_all(&digest)?;
        self.out.into_inner().map_err(|e| e.into_error())
    }

    fn put(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.hasher.update(bytes);
        self.out.write_all(bytes)
    }
}

/// Type and size, size in little-endian groups of 7 bits after the first 4.
fn object_header(type_code: u8, size: usize) -> Vec<u8> {
    let mut size = size as u64;
    let mut out = vec![(type_code << 4) | (size & 0x0f) as u8];
    size >>= 4;
    while size > 0 {
        if let Some(last) = out.last_mut() {
            *last |= 0x80;
        }
        out.push((size & 0x7f) as u8);
        size >>= 7;
    }
    out
}

fn adler32(data: &[u8]) -> u32 {
    const MOD: u32 = 65_521;
    // 5,552 bytes is the most that can be summed before `b` may overflow a u32.
    let (mut a, mut b) = (1u32, 0u32);
    for chunk in data.chunks(5552) {
        for &byte in chunk {
            a += u32::from(byte);
            b += a;
        }
        a %= MOD;
        b %= MOD;
    }
    (b << 16) | a
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adler32_known_value() {
        assert_eq!(adler32(b"Wikipedia"), 0x11E6_0398);
        assert_eq!(adler32(b""), 1);
    }

    #[test]
    fn size_header_encoding() {
        assert_eq!(object_header(3, 0), [0x30]);
        assert_eq!(object_header(3, 15), [0x3f]);
        assert_eq!(object_header(3, 16), [0xb0, 0x01]);
        assert_eq!(object_header(1, 300), [0x9c, 0x12]);
    }

    #[test]
    fn libgit2_indexes_the_pack() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = git2::Repository::init_bare(tmp.path()).unwrap();
        let big: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        let blobs: [&[u8]; 3] = [b"", b"hello\n", &big];
        let ids: Vec<git2::Oid> = blobs
            .iter()
            .map(|b| git2::Oid::hash_object(git2::ObjectType::Blob, b).unwrap())
            .collect();
        let odb = repo.odb().unwrap();
        let mut pack = PackWriter::new(odb.packwriter().unwrap(), blobs.len()).unwrap();
        for b in blobs {
            pack.object(git2::ObjectType::Blob, b).unwrap();
        }
        pack.finish().unwrap().commit().unwrap();
        for (id, b) in ids.iter().zip(blobs) {
            assert_eq!(repo.find_blob(*id).unwrap().content(), b);
        }
    }
}
