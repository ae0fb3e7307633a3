//! The initial handshake packet (protocol version 10) in both directions:
//! parsing a server's greeting, with MariaDB's extended capabilities from
//! the filler, and writing the greeting myplex sends its clients, byte for
//! byte in the layout MariaDB uses. Also reads the extended capabilities out
//! of a client's handshake response.

use bytes::{BufMut, BytesMut};

use super::caps::flag;
use super::lenenc::Reader;

/// A parsed or to-be-written greeting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Greeting {
    /// Server version string.
    pub version: Vec<u8>,
    /// Connection (thread) id.
    pub connection_id: u32,
    /// The 20-byte scramble (without the trailing NUL).
    pub scramble: Vec<u8>,
    /// Capabilities, the extended MariaDB ones in the high half.
    pub capabilities: u64,
    /// Default collation id (one byte on the wire).
    pub collation: u8,
    /// Server status flags.
    pub status: u16,
    /// Authentication plugin name.
    pub auth_plugin: Vec<u8>,
}

impl Greeting {
    /// Parses a server greeting payload.
    pub fn parse(payload: &[u8]) -> Option<Self> {
        let mut r = Reader::new(payload);
        if r.u8()? != 10 {
            return None;
        }
        let version = r.null_str()?.to_vec();
        let connection_id = r.u32()?;
        let mut scramble = r.bytes(8)?.to_vec();
        r.u8()?;
        let lo = r.u16()?;
        let mut caps = u64::from(lo);
        let (mut collation, mut status) = (0, 0);
        let mut auth_plugin = Vec::new();
        if !r.is_empty() {
            collation = r.u8()?;
            status = r.u16()?;
            caps |= u64::from(r.u16()?) << 16;
            let auth_len = usize::from(r.u8()?);
            let filler = r.bytes(10)?;
            if caps & u64::from(flag::MYSQL) == 0 {
                let ext = u32::from_le_bytes([filler[6], filler[7], filler[8], filler[9]]);
                caps |= u64::from(ext) << 32;
            }
            if caps & u64::from(flag::SECURE_CONNECTION) != 0 {
                let n = auth_len.saturating_sub(8).max(13);
                let part2 = r.bytes(n.min(r.rest().len()))?;
                scramble.extend_from_slice(part2);
                if scramble.last() == Some(&0) {
                    scramble.pop();
                }
            }
            if caps & u64::from(flag::PLUGIN_AUTH) != 0 {
                let rest = r.rest();
                let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
                auth_plugin = rest[..end].to_vec();
            }
        }
        Some(Self {
            version,
            connection_id,
            scramble,
            capabilities: caps,
            collation,
            status,
            auth_plugin,
        })
    }

    /// Writes the greeting payload. The scramble must be 20 bytes.
    pub fn write(&self, out: &mut BytesMut) {
        let caps = self.capabilities;
        out.put_u8(10);
        out.put_slice(&self.version);
        out.put_u8(0);
        out.put_u32_le(self.connection_id);
        out.put_slice(&self.scramble[..8.min(self.scramble.len())]);
        out.put_u8(0);
        out.put_u16_le(caps as u16);
        out.put_u8(self.collation);
        out.put_u16_le(self.status);
        out.put_u16_le((caps >> 16) as u16);
        let plugin_auth = caps & u64::from(flag::PLUGIN_AUTH) != 0;
        out.put_u8(if plugin_auth {
            (self.scramble.len() + 1) as u8
        } else {
            0
        });
        out.put_slice(&[0u8; 6]);
        if caps & u64::from(flag::MYSQL) == 0 {
            out.put_u32_le((caps >> 32) as u32);
        } else {
            out.put_u32_le(0);
        }
        if caps & u64::from(flag::SECURE_CONNECTION) != 0 {
            out.put_slice(self.scramble.get(8..).unwrap_or_default());
            out.put_u8(0);
        }
        if plugin_auth {
            out.put_slice(&self.auth_plugin);
            out.put_u8(0);
        }
    }
}

/// The extended capabilities in a client's handshake response (the last four
/// filler bytes), read only when the client cleared bit 0 as MariaDB
/// clients do toward a MariaDB server. Returned in the high half.
pub fn response_ext_caps(payload: &[u8]) -> u64 {
    let Some(b) = payload.get(..32) else {
        return 0;
    };
    let low = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    if low & flag::MYSQL != 0 {
        return 0;
    }
    u64::from(u32::from_le_bytes([b[28], b[29], b[30], b[31]])) << 32
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A MariaDB 10.11.19 greeting captured off the wire.
    const CAPTURED: &str = "0a352e352e352d31302e31312e31392d4d6172696144422d302b64656231327531001e000000272e512d2d3b7e2b00fef7080200ff81150000000000001d0000005859384946623d4a3b2a5d78006d7973716c5f6e61746976655f70617373776f726400";

    fn unhex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
            .collect()
    }

    #[test]
    fn parses_and_rewrites_mariadb_greeting_exactly() {
        let raw = unhex(CAPTURED);
        let g = Greeting::parse(&raw).expect("greeting");
        assert_eq!(g.version, b"5.5.5-10.11.19-MariaDB-0+deb12u1");
        assert_eq!(g.connection_id, 0x1e);
        assert_eq!(g.scramble, b"'.Q--;~+XY8IFb=J;*]x");
        assert_eq!(g.capabilities, 0x81ff_f7fe | (0x1d << 32));
        assert_eq!((g.collation, g.status), (8, 2));
        assert_eq!(g.auth_plugin, b"mysql_native_password");
        let mut out = BytesMut::new();
        g.write(&mut out);
        assert_eq!(&out[..], &raw[..], "same bytes as the server's");
    }

    #[test]
    fn mysql_style_greeting_has_no_extended_caps() {
        let g = Greeting {
            version: b"8.0.36".to_vec(),
            connection_id: 7,
            scramble: b"abcdefghijklmnopqrst".to_vec(),
            capabilities: 0xdfff_ffff | (0x1d << 32),
            collation: 255,
            status: 2,
            auth_plugin: b"caching_sha2_password".to_vec(),
        };
        let mut out = BytesMut::new();
        g.write(&mut out);
        let back = Greeting::parse(&out).expect("parses");
        assert_eq!(back.capabilities, 0xdfff_ffff, "filler is zero");
        assert_eq!(back.scramble, g.scramble);
        assert_eq!(back.auth_plugin, g.auth_plugin);
    }

    #[test]
    fn response_ext_caps_only_without_bit_0() {
        let mut p = vec![0u8; 40];
        p[..4].copy_from_slice(&0x000a_a20eu32.to_le_bytes());
        p[28] = 0x08;
        assert_eq!(response_ext_caps(&p), 0x08 << 32);
        p[0] |= 1;
        assert_eq!(response_ext_caps(&p), 0);
        assert_eq!(response_ext_caps(&p[..20]), 0);
    }

    #[test]
    fn truncated_greetings_do_not_panic() {
        let raw = unhex(CAPTURED);
        for n in 0..raw.len() {
            let _ = Greeting::parse(&raw[..n]);
        }
    }
}
