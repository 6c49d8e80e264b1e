"""The dashboard pages. Streamlit runs each file as a script, not as a module of this
package, so their imports are absolute (`guardtrace.store`), never relative."""
