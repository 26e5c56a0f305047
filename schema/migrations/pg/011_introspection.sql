-- Artifact introspection (API.md "Artifact introspection and schema compatibility"): what
-- the headers of an upload's weight files said, read once at upload, and per version the
-- copy taken at creation together with the input/output schema its trainer declared.

-- JSON arrays and objects as text: formats ["gguf","onnx","safetensors"] (NULL: uploaded
-- before introspection existed), introspection {"format","tensors",…} (NULL: none found).
ALTER TABLE blobs ADD COLUMN formats TEXT;
ALTER TABLE blobs ADD COLUMN introspection TEXT;

ALTER TABLE versions ADD COLUMN introspection TEXT;
ALTER TABLE versions ADD COLUMN io_schema TEXT;
