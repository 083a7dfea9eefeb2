// Runs WebAssembly jobs in Node.js (V8) for keracheck; see keracheck/runners/node_wasm.py.
//
// Usage: node wasm_node_runner.mjs SPEC.json
// SPEC: {"jobs": [{"wasm": "j0.wasm", "input": "j0.in", "output": "j0.out", "memory": "mem",
//                  "writes": [[memOffset, fileOffset, nbytes], ...],
//                  "calls": [["export", [i32 args...]], ...],
//                  "reads": [[memOffset, nbytes], ...], "pages": minPages}, ...]}
// File names are relative to SPEC's folder.  For each job the module is instantiated with no
// imports, its memory grown to at least "pages" 64 KiB pages (the scratch the calls use) and to
// fit every region, the writes copied in from "input", the calls made in order, and the reads
// concatenated into "output".  results.json (beside SPEC) gets one
// {"ok": true} or {"ok": false, "error": "..."} per job; the exit status is 0 unless SPEC itself
// cannot be read.
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";

const PAGE = 65536;

function runJob(dir, job) {
  const module = new WebAssembly.Module(readFileSync(join(dir, job.wasm)));
  const instance = new WebAssembly.Instance(module, {});
  const memory = instance.exports[job.memory];
  if (!(memory instanceof WebAssembly.Memory)) {
    throw new Error(`module exports no memory named ${job.memory}`);
  }
  const ends = [...job.writes.map(([off, , n]) => off + n), ...job.reads.map(([off, n]) => off + n)];
  const pages = Math.max(job.pages ?? 0, Math.ceil(Math.max(0, ...ends) / PAGE));
  const have = memory.buffer.byteLength / PAGE;
  if (pages > have) memory.grow(pages - have);
  const input = job.writes.length ? readFileSync(join(dir, job.input)) : new Uint8Array(0);
  let mem = new Uint8Array(memory.buffer);
  for (const [off, foff, n] of job.writes) mem.set(input.subarray(foff, foff + n), off);
  for (const [name, args] of job.calls) {
    const fn = instance.exports[name];
    if (typeof fn !== "function") throw new Error(`module exports no function named ${name}`);
    fn(...args);
  }
  mem = new Uint8Array(memory.buffer); // a call may have grown (and detached) the buffer
  const out = Buffer.concat(job.reads.map(([off, n]) => mem.subarray(off, off + n)));
  writeFileSync(join(dir, job.output), out);
}

const specPath = process.argv[2];
const dir = dirname(specPath);
const spec = JSON.parse(readFileSync(specPath, "utf8"));
const results = spec.jobs.map((job) => {
  try {
    runJob(dir, job);
    return { ok: true };
  } catch (e) {
    return { ok: false, error: String((e && e.message) || e) };
  }
});
writeFileSync(join(dir, "results.json"), JSON.stringify(results));
