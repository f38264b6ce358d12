//! Python values to runtime values and back: addresses, messages,
//! timeouts, configurations, counters.

use crate::errors::{bad_address, invalid_argument, to_py};
use bytes::Bytes;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{
    PyBool, PyByteArray, PyBytes, PyDict, PyFloat, PyInt, PyList, PyMemoryView, PyString, PyTuple,
};
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

/// An address: `"IP:port"` (`"[v6]:port"` for IPv6) or an `(IP, port)`
/// tuple, as Python's sockets take. Names are not resolved.
pub(crate) fn parse_addr(py: Python<'_>, obj: &Bound<'_, PyAny>) -> PyResult<SocketAddr> {
    if let Ok(s) = obj.cast::<PyString>() {
        let s = s.to_cow()?;
        return s.parse::<SocketAddr>().map_err(|_| {
            bad_address(
                py,
                format!("{s:?}: expected \"IP:port\", e.g. \"127.0.0.1:4000\" or \"[::1]:4000\""),
            )
        });
    }
    if let Ok(t) = obj.cast::<PyTuple>() {
        if t.len() == 2 {
            let host = t.get_item(0)?;
            let port = t.get_item(1)?;
            let host: String = host
                .extract()
                .map_err(|_| bad_address(py, format!("{t}: the host must be a string")))?;
            let port: u16 = port
                .extract()
                .map_err(|_| bad_address(py, format!("{t}: the port must be 0..=65535")))?;
            let ip = host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .parse::<IpAddr>()
                .map_err(|_| {
                    bad_address(
                        py,
                        format!("{host:?}: expected an IP address (names are not resolved)"),
                    )
                })?;
            return Ok(SocketAddr::new(ip, port));
        }
    }
    Err(PyTypeError::new_err(format!(
        "an address is a \"IP:port\" string or an (IP, port) tuple, not {}",
        obj.get_type().name()?
    )))
}

/// A message: `bytes`, `bytearray` or `memoryview` (copied: the runtime
/// keeps it until the peer has all of it).
pub(crate) fn message(obj: &Bound<'_, PyAny>) -> PyResult<Bytes> {
    if let Ok(b) = obj.cast::<PyBytes>() {
        return Ok(Bytes::copy_from_slice(b.as_bytes()));
    }
    if let Ok(b) = obj.cast::<PyByteArray>() {
        return Ok(Bytes::from(b.to_vec()));
    }
    if obj.is_instance_of::<PyMemoryView>() {
        let b = obj.call_method0("tobytes")?;
        return Ok(Bytes::copy_from_slice(b.cast::<PyBytes>()?.as_bytes()));
    }
    Err(PyTypeError::new_err(format!(
        "a message is bytes, bytearray or memoryview, not {}",
        obj.get_type().name()?
    )))
}

/// A timeout in seconds (`None`: no limit).
pub(crate) fn timeout(py: Python<'_>, secs: Option<f64>) -> PyResult<Option<Duration>> {
    match secs {
        None => Ok(None),
        Some(s) => Duration::try_from_secs_f64(s).map(Some).map_err(|_| {
            invalid_argument(
                py,
                format!("timeout must be None or a number of seconds >= 0, got {s}"),
            )
        }),
    }
}

/// A configuration: `None` (the defaults), TOML text, a dict of the same
/// shape (as `default_config()` returns), or the path of a TOML file.
/// Every check is the runtime's own (`Config::from_toml_str`).
pub(crate) fn config(py: Python<'_>, obj: Option<&Bound<'_, PyAny>>) -> PyResult<homa::Config> {
    let Some(obj) = obj else {
        return Ok(homa::Config::default());
    };
    if obj.is_none() {
        return Ok(homa::Config::default());
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return homa::Config::from_toml_str(&s.to_cow()?).map_err(|e| to_py(py, e));
    }
    if let Ok(d) = obj.cast::<PyDict>() {
        let table = table(py, d, "")?;
        let text = toml::to_string(&table).map_err(|e| {
            to_py(
                py,
                homa::Error::Config(format!("cannot express the dict as TOML: {e}")),
            )
        })?;
        return homa::Config::from_toml_str(&text).map_err(|e| to_py(py, e));
    }
    let os = py.import("os")?;
    if obj.is_instance(&os.getattr("PathLike")?)? {
        let path: std::path::PathBuf = os.call_method1("fspath", (obj,))?.extract()?;
        return homa::Config::from_toml_file(&path).map_err(|e| to_py(py, e));
    }
    Err(PyTypeError::new_err(format!(
        "config is None, TOML text, a dict or a path, not {}",
        obj.get_type().name()?
    )))
}

/// A dict as a TOML table; `None` values are left out (the default).
fn table(py: Python<'_>, d: &Bound<'_, PyDict>, at: &str) -> PyResult<toml::Table> {
    let mut t = toml::Table::new();
    for (k, v) in d.iter() {
        let key: String = k.extract().map_err(|_| {
            to_py(
                py,
                homa::Error::Config(format!("{at}: keys must be strings, got {k:?}")),
            )
        })?;
        let path = if at.is_empty() {
            key.clone()
        } else {
            format!("{at}.{key}")
        };
        if let Some(v) = value(py, &v, &path)? {
            t.insert(key, v);
        }
    }
    Ok(t)
}

/// One Python value as a TOML value (`None` for Python's `None`).
fn value(py: Python<'_>, v: &Bound<'_, PyAny>, at: &str) -> PyResult<Option<toml::Value>> {
    let bad = |what: String| to_py(py, homa::Error::Config(format!("{at}: {what}")));
    Ok(Some(if v.is_none() {
        return Ok(None);
    } else if let Ok(b) = v.cast::<PyBool>() {
        toml::Value::Boolean(b.is_true())
    } else if v.is_instance_of::<PyInt>() {
        toml::Value::Integer(
            v.extract::<i64>()
                .map_err(|_| bad(format!("{v} does not fit in 64 bits")))?,
        )
    } else if let Ok(f) = v.cast::<PyFloat>() {
        toml::Value::Float(f.value())
    } else if let Ok(s) = v.cast::<PyString>() {
        toml::Value::String(s.to_cow()?.into_owned())
    } else if let Ok(d) = v.cast::<PyDict>() {
        toml::Value::Table(table(py, d, at)?)
    } else if v.is_instance_of::<PyList>() || v.is_instance_of::<PyTuple>() {
        let mut items = Vec::new();
        for (i, item) in v.try_iter()?.enumerate() {
            match value(py, &item?, &format!("{at}[{i}]"))? {
                Some(x) => items.push(x),
                None => return Err(bad("lists cannot hold None".into())),
            }
        }
        toml::Value::Array(items)
    } else {
        return Err(bad(format!(
            "{} is not a TOML value (bool, int, float, str, list, dict)",
            v.get_type().name()?
        )));
    }))
}

/// A serialisable runtime value (configuration, counters) as Python
/// dicts, lists and scalars. Per-packet-type arrays (`{"packets": [..],
/// "bytes": [..]}`) become dicts keyed by the packet type's name.
pub(crate) fn to_python<T: serde::Serialize>(py: Python<'_>, v: &T) -> PyResult<Py<PyAny>> {
    let v = serde_json::to_value(v).map_err(|e| {
        pyo3::exceptions::PyRuntimeError::new_err(format!("cannot convert to Python: {e}"))
    })?;
    json(py, &v)
}

fn json(py: Python<'_>, v: &serde_json::Value) -> PyResult<Py<PyAny>> {
    use serde_json::Value;
    Ok(match v {
        Value::Null => py.None(),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any().unbind(),
        Value::Number(n) => {
            if let Some(u) = n.as_u64() {
                u.into_pyobject(py)?.into_any().unbind()
            } else if let Some(i) = n.as_i64() {
                i.into_pyobject(py)?.into_any().unbind()
            } else {
                n.as_f64()
                    .unwrap_or(f64::NAN)
                    .into_pyobject(py)?
                    .into_any()
                    .unbind()
            }
        }
        Value::String(s) => s.into_pyobject(py)?.into_any().unbind(),
        Value::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(json(py, item)?)?;
            }
            list.into_any().unbind()
        }
        Value::Object(map) => {
            let dict = PyDict::new(py);
            let per_type = map.len() == 2
                && ["packets", "bytes"].iter().all(|k| {
                    map.get(*k)
                        .and_then(Value::as_array)
                        .is_some_and(|a| a.len() == homa_wire::PacketType::COUNT)
                });
            for (k, v) in map {
                match v.as_array() {
                    Some(a) if per_type => {
                        let named = PyDict::new(py);
                        for (ty, n) in homa_wire::PacketType::ALL.iter().zip(a) {
                            named.set_item(ty.name(), json(py, n)?)?;
                        }
                        dict.set_item(k, named)?;
                    }
                    _ => dict.set_item(k, json(py, v)?)?,
                }
            }
            dict.into_any().unbind()
        }
    })
}
