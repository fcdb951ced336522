//! Integers in JSON request bodies as JSON Schema counts them: `2.0` is the
//! integer 2, so a client that writes every number as a float (JavaScript,
//! many generators) is not refused a value the schema admits. Use with
//! `#[serde(deserialize_with = "...")]`; fractions and values out of range
//! are still refused.

use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, Deserialize, Deserializer, Visitor};

/// An integer type a whole JSON number converts to.
pub trait Whole: Sized + TryFrom<i64> + TryFrom<u64> {}

impl Whole for u32 {}
impl Whole for i32 {}
impl Whole for u64 {}
impl Whole for i64 {}

/// One integer, written `2` or `2.0`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Int<T>(pub T);

impl<'de, T: Whole> Deserialize<'de> for Int<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(PhantomData<T>);

        impl<T: Whole> Visitor<'_> for V<T> {
            type Value = Int<T>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "an integer in range for {}", std::any::type_name::<T>())
            }

            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Int<T>, E> {
                T::try_from(v)
                    .map(Int)
                    .map_err(|_| E::invalid_value(de::Unexpected::Unsigned(v), &self))
            }

            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Int<T>, E> {
                T::try_from(v)
                    .map(Int)
                    .map_err(|_| E::invalid_value(de::Unexpected::Signed(v), &self))
            }

            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Int<T>, E> {
                // Beyond 2^53 a float no longer spells one integer.
                const EXACT: f64 = 9_007_199_254_740_992.0;
                if v.fract() == 0.0 && v.abs() <= EXACT {
                    self.visit_i64(v as i64)
                } else {
                    Err(E::invalid_value(de::Unexpected::Float(v), &self))
                }
            }
        }

        d.deserialize_any(V(PhantomData))
    }
}

/// A whole number.
pub fn int<'de, D: Deserializer<'de>, T: Whole>(d: D) -> Result<T, D::Error> {
    Int::deserialize(d).map(|Int(v)| v)
}

/// A whole number or `null`.
pub fn option<'de, D: Deserializer<'de>, T: Whole>(d: D) -> Result<Option<T>, D::Error> {
    Option::<Int<T>>::deserialize(d).map(|v| v.map(|Int(v)| v))
}

/// An array of whole numbers.
pub fn vec<'de, D: Deserializer<'de>, T: Whole>(d: D) -> Result<Vec<T>, D::Error> {
    Vec::<Int<T>>::deserialize(d).map(|v| v.into_iter().map(|Int(v)| v).collect())
}

/// An array of whole numbers or `null`.
pub fn option_vec<'de, D: Deserializer<'de>, T: Whole>(d: D) -> Result<Option<Vec<T>>, D::Error> {
    Option::<Vec<Int<T>>>::deserialize(d)
        .map(|v| v.map(|v| v.into_iter().map(|Int(v)| v).collect()))
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    #[derive(Debug, Deserialize, PartialEq)]
    struct T {
        #[serde(deserialize_with = "super::int")]
        a: u32,
        #[serde(default, deserialize_with = "super::option")]
        b: Option<i32>,
        #[serde(default, deserialize_with = "super::vec")]
        c: Vec<u32>,
    }

    fn parse(s: &str) -> Result<T, serde_json::Error> {
        serde_json::from_str(s)
    }

    #[test]
    fn whole_floats_are_integers() {
        assert_eq!(
            parse(r#"{"a": 2.0, "b": -3.0, "c": [1, 2.0, 4294967295.0]}"#).unwrap(),
            T {
                a: 2,
                b: Some(-3),
                c: vec![1, 2, 4_294_967_295]
            }
        );
        assert_eq!(
            parse(r#"{"a": 7, "b": null}"#).unwrap(),
            T {
                a: 7,
                b: None,
                c: vec![]
            }
        );
    }

    #[test]
    fn fractions_strings_and_out_of_range_values_are_refused() {
        for bad in [
            r#"{"a": 2.5}"#,
            r#"{"a": -1}"#,
            r#"{"a": -1.0}"#,
            r#"{"a": 4294967296}"#,
            r#"{"a": 1e300}"#,
            r#"{"a": "2"}"#,
            r#"{"a": 1, "c": [0.5]}"#,
            r#"{"a": 1, "b": 2147483648.0}"#,
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
