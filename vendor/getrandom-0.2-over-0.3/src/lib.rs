//! getrandom 0.2's API (`getrandom`, `Error`) over getrandom 0.3's `fill`: see Cargo.toml.

use core::fmt;
use core::num::NonZeroU32;

/// A failure to get random bytes: an OS error number, or a code of the library's own.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Error(NonZeroU32);

impl Error {
    /// Codes at or above this are the library's own errors, not OS error numbers.
    pub const INTERNAL_START: u32 = 1 << 31;
    /// Codes at or above this are a custom backend's.
    pub const CUSTOM_START: u32 = (1 << 31) + (1 << 30);
    /// The platform has no source of randomness.
    pub const UNSUPPORTED: Error = Error(match NonZeroU32::new(Self::INTERNAL_START) {
        Some(code) => code,
        None => unreachable!(),
    });

    /// The OS error number, if the failure was one.
    pub fn raw_os_error(self) -> Option<i32> {
        (self.0.get() < Self::INTERNAL_START).then_some(self.0.get() as i32)
    }

    pub const fn code(self) -> NonZeroU32 {
        self.0
    }
}

impl From<NonZeroU32> for Error {
    fn from(code: NonZeroU32) -> Error {
        Error(code)
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "getrandom::Error({})", self.0)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.raw_os_error() {
            Some(errno) => write!(f, "OS error {errno} getting random bytes"),
            None => write!(f, "getrandom error code {}", self.0),
        }
    }
}

impl std::error::Error for Error {}

impl From<Error> for std::io::Error {
    fn from(e: Error) -> std::io::Error {
        match e.raw_os_error() {
            Some(errno) => std::io::Error::from_raw_os_error(errno),
            None => std::io::Error::other(e),
        }
    }
}

/// Fills `dest` with random bytes from the OS (through getrandom 0.3).
pub fn getrandom(dest: &mut [u8]) -> Result<(), Error> {
    getrandom03::fill(dest).map_err(|e| {
        let code = e
            .raw_os_error()
            .and_then(|errno| u32::try_from(errno).ok())
            .filter(|&errno| errno < Error::INTERNAL_START)
            .and_then(NonZeroU32::new);
        code.map_or(Error::UNSUPPORTED, Error)
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn fills_every_byte() {
        let mut a = [0u8; 64];
        let mut b = [0u8; 64];
        super::getrandom(&mut a).unwrap();
        super::getrandom(&mut b).unwrap();
        assert_ne!(a, b);
    }
}
