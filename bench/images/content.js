// bench/images: the content of the bench's images — layers that look like a
// real image's rather than one giant zero file: many files of mixed sizes
// (mostly small, some medium, a few large) in nested dirs, of three kinds:
// text (source, config, docs: compresses ~3-4x), random bytes (compressed
// assets, archives: does not compress) and binary-like (random with runs of
// zeros, as ELF files: compresses ~2x). Sizes, names and kinds come from a
// seeded generator, so a layer of the same seed and budget is the same layer
// (same digest: two images given it share it); random bytes come from it too.
// buildImages makes the bench's two images in an OCI layout with umoci.
'use strict';
const fs = require('fs');
const path = require('path');
const { buildTestImage, hostBinariesLayer } = require('@csiplug/images/testing');

const CREATED = '2026-01-01T00:00:00Z';

/** mulberry32: a small seeded generator, enough for sizes, names and filler bytes. */
function seeded(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const WORDS = (
  'the of and to in is for on with as by at from that this be are was it or an not which have has were can will if ' +
  'function return const let var import export class interface type string number boolean null undefined true false ' +
  'config server client request response error value key name path file dir mount volume plugin node task image layer ' +
  'digest manifest registry blob store root user group mode size time start stop run exec driver alloc job ' +
  'include define struct int char void static unsigned long size_t printf malloc free buffer length offset'
).split(' ');

/** A few MB of text-like bytes, made once: file bodies are slices of it at random offsets (gzip's 32 KB window sees no repeats). */
function textCorpus(rand, bytes) {
  const parts = [];
  let n = 0;
  while (n < bytes) {
    let line = '';
    const words = 3 + Math.floor(rand() * 12);
    for (let i = 0; i < words; i++) {
      line += (i ? ' ' : '  '.repeat(Math.floor(rand() * 4))) + WORDS[Math.floor(rand() * WORDS.length)];
      if (rand() < 0.1) line += ` ${Math.floor(rand() * 100000)}`;
    }
    line += rand() < 0.3 ? ';\n' : '\n';
    parts.push(line);
    n += line.length;
  }
  return Buffer.from(parts.join(''));
}

/** Random bytes from the seeded generator (4 bytes per call). */
function randomBytes(rand, size) {
  const buf = Buffer.allocUnsafe(size + 3);
  for (let i = 0; i < size; i += 4) buf.writeUInt32LE(Math.floor(rand() * 4294967296), i);
  return buf.subarray(0, size);
}

/** Random bytes with runs of zeros between them, as a compiled program's sections. */
function binaryLike(rand, size) {
  const buf = randomBytes(rand, size);
  for (let i = 0; i < size;) {
    const run = 64 + Math.floor(rand() * 2048);
    if (rand() < 0.5) buf.fill(0, i, Math.min(size, i + run));
    i += run;
  }
  return buf;
}

/** A size drawn log-uniformly from [lo, hi). */
const logUniform = (rand, lo, hi) => Math.floor(lo * Math.pow(hi / lo, rand()));

let corpus;

/**
 * The files of one layer: about `budget` bytes under `prefix`, from `seed`.
 * Returns { files, bytes, count, kinds }.
 */
function layerFiles(seed, prefix, budget) {
  const rand = seeded(seed);
  corpus ??= textCorpus(seeded(1), 4 << 20);
  const files = {};
  const kinds = { text: 0, random: 0, binary: 0 };
  let bytes = 0;
  let count = 0;
  while (bytes < budget) {
    const r = rand();
    // 90% small (256 B-16 KB), 8% medium (16-512 KB), 2% large (0.5-6 MB).
    const size = Math.min(
      budget - bytes + 256,
      r < 0.9 ? logUniform(rand, 256, 16 << 10) : r < 0.98 ? logUniform(rand, 16 << 10, 512 << 10) : logUniform(rand, 512 << 10, 6 << 20),
    );
    const k = rand();
    let body;
    let ext;
    if (k < 0.5) {
      const at = Math.floor(rand() * (corpus.length - size));
      body = size <= corpus.length ? Buffer.from(corpus.subarray(at, at + size)) : Buffer.concat([corpus, corpus]).subarray(0, size);
      ext = 'txt';
      kinds.text += size;
    } else if (k < 0.8) {
      body = randomBytes(rand, size);
      ext = 'bin';
      kinds.random += size;
    } else {
      body = binaryLike(rand, size);
      ext = 'so';
      kinds.binary += size;
    }
    const dir = `${prefix}/d${Math.floor(rand() * 16)}/d${Math.floor(rand() * 8)}`;
    files[`${dir}/f${count}.${ext}`] = body;
    bytes += size;
    count++;
  }
  return { files, bytes, count, kinds };
}

/** The bench's images: `app` (5 layers, `megabytes` in all) and `other` (app's first 4 layers and one of its own). */
async function buildImages(layoutDir, megabytes) {
  const perLayer = Math.floor((megabytes * 1e6) / 5);
  const bins = await hostBinariesLayer(['/bin/sh', '/bin/sleep']);
  const binBytes = Object.values(bins.files).reduce((n, b) => n + b.length, 0);
  const layers = [];
  const stats = { files: 0, bytes: 0, text: 0, random: 0, binary: 0 };
  for (let i = 0; i < 6; i++) {
    const budget = i === 5 ? Math.floor(perLayer / 2) : i === 0 ? perLayer - binBytes : perLayer;
    const c = layerFiles(1000 + i, `opt/bench/layer${i}`, budget);
    const files = { ...c.files };
    const modes = {};
    if (i === 0) {
      Object.assign(files, bins.files, { 'etc/passwd': 'root:x:0:0:root:/root:/bin/sh\n', 'etc/group': 'root:x:0:\n' });
      Object.assign(modes, bins.modes);
    }
    layers.push({ files, modes });
    if (i < 5) {
      stats.files += c.count + (i === 0 ? Object.keys(bins.files).length + 2 : 0);
      stats.bytes += c.bytes + (i === 0 ? binBytes : 0);
      stats.text += c.kinds.text;
      stats.random += c.kinds.random;
      stats.binary += c.kinds.binary;
    }
  }
  await buildTestImage(layoutDir, 'app', { layers: layers.slice(0, 5), created: CREATED });
  await buildTestImage(layoutDir, 'other', { layers: [...layers.slice(0, 4), layers[5]], created: CREATED });
  return stats;
}

/** Layer digests and sizes of a tag in the OCI layout. */
function layoutLayers(layoutDir, tag) {
  const index = JSON.parse(fs.readFileSync(path.join(layoutDir, 'index.json'), 'utf8'));
  const desc = index.manifests.find((m) => m.annotations?.['org.opencontainers.image.ref.name'] === tag);
  const blob = (d) => path.join(layoutDir, 'blobs', 'sha256', d.replace('sha256:', ''));
  const manifest = JSON.parse(fs.readFileSync(blob(desc.digest), 'utf8'));
  return manifest.layers.map((l) => ({ digest: l.digest, size: l.size }));
}

module.exports = { layerFiles, buildImages, layoutLayers };
