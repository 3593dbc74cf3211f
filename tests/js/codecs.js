// Snappy, LZ4 and ZSTD for KafkaJS, which ships GZIP only: `require("./codecs")` plugs them in with
// `CompressionCodecs[CompressionTypes.X] = ...` (https://kafka.js.org/docs/producing#compression).
// All three are plain JavaScript or WebAssembly bundled in the package (no native build, nothing
// fetched at run time), pinned in package.json:
// - Snappy: kafkajs-snappy (snappyjs). It writes raw Snappy and reads raw or xerial-framed Snappy.
// - LZ4: lz4js's block compressor in an LZ4 frame (https://github.com/lz4/lz4/blob/dev/doc/lz4_Frame_format.md)
//   written here as Kafka's Lz4BlockOutputStream writes it: 64 KiB blocks, each compressed on its
//   own, with the block-independence flag set (Kafka's reader refuses a frame without it).
// - ZSTD: zstd-codec (zstd compiled to WebAssembly), its streaming API, which also reads frames
//   that do not record their content size (librdkafka's and Java's).
const { CompressionTypes, CompressionCodecs } = require("kafkajs");
const SnappyCodec = require("kafkajs-snappy");
const lz4 = require("lz4js");
const xxh32 = require("lz4js/xxh32.js");
const { ZstdCodec } = require("zstd-codec");

const LZ4_MAGIC = 0x184d2204;
const LZ4_FLG = 0x60; // version 01, block independence; no checksums, no content size
const LZ4_BD = 4 << 4; // 64 KiB blocks
const LZ4_BLOCK = 64 * 1024;

function lz4Compress(src) {
  const parts = [];
  const header = Buffer.alloc(7);
  header.writeUInt32LE(LZ4_MAGIC, 0);
  header[4] = LZ4_FLG;
  header[5] = LZ4_BD;
  header[6] = (xxh32.hash(0, header, 4, 2) >>> 8) & 0xff;
  parts.push(header);
  const scratch = new Uint8Array(lz4.compressBound(LZ4_BLOCK));
  for (let start = 0; start < src.length; start += LZ4_BLOCK) {
    const block = src.subarray(start, Math.min(start + LZ4_BLOCK, src.length));
    const size = lz4.compressBlock(block, scratch, 0, block.length, new Uint32Array(1 << 16));
    const length = Buffer.alloc(4);
    if (size === 0 || size >= block.length) {
      length.writeUInt32LE((0x80000000 | block.length) >>> 0, 0); // stored uncompressed
      parts.push(length, Buffer.from(block));
    } else {
      length.writeUInt32LE(size, 0);
      parts.push(length, Buffer.from(scratch.subarray(0, size)));
    }
  }
  parts.push(Buffer.alloc(4)); // end mark
  return Buffer.concat(parts);
}

// lz4js's own frame reader skips a block checksum before the block instead of after it: read the
// frame here and let lz4js decode the blocks.
function lz4Decompress(src) {
  if (src.readUInt32LE(0) !== LZ4_MAGIC) throw new Error("lz4: not an LZ4 frame");
  const flg = src[4];
  const blockMax = { 4: 1 << 16, 5: 1 << 18, 6: 1 << 20, 7: 1 << 22 }[(src[5] >> 4) & 7];
  if ((flg & 0xc0) !== 0x40 || blockMax === undefined) throw new Error("lz4: unsupported frame descriptor");
  let pos = 6 + (flg & 0x08 ? 8 : 0) + 1; // FLG BD [content size] HC
  const blocks = [];
  for (;;) {
    const word = src.readUInt32LE(pos);
    pos += 4;
    if (word === 0) break;
    const size = word & 0x7fffffff;
    blocks.push({ start: pos, size, stored: (word & 0x80000000) !== 0 });
    pos += size + (flg & 0x10 ? 4 : 0); // [block checksum]
  }
  const dst = new Uint8Array(blocks.length * blockMax);
  let end = 0;
  for (const b of blocks) {
    if (b.stored) {
      dst.set(src.subarray(b.start, b.start + b.size), end);
      end += b.size;
    } else {
      end = lz4.decompressBlock(src, dst, b.start, b.size, end);
    }
  }
  return Buffer.from(dst.buffer, 0, end);
}

const Lz4Codec = () => ({
  async compress(encoder) {
    return lz4Compress(encoder.buffer);
  },
  async decompress(buffer) {
    return lz4Decompress(buffer);
  },
});

let zstd = null;
const zstdReady = new Promise((resolve) => {
  ZstdCodec.run((binding) => {
    zstd = new binding.Streaming();
    resolve();
  });
});

const ZstdCodecForKafkaJS = () => ({
  async compress(encoder) {
    await zstdReady;
    return Buffer.from(zstd.compress(encoder.buffer, 3));
  },
  async decompress(buffer) {
    await zstdReady;
    const out = zstd.decompress(buffer);
    if (out === null) throw new Error("zstd: corrupt frame");
    return Buffer.from(out);
  },
});

CompressionCodecs[CompressionTypes.Snappy] = SnappyCodec;
CompressionCodecs[CompressionTypes.LZ4] = Lz4Codec;
CompressionCodecs[CompressionTypes.ZSTD] = ZstdCodecForKafkaJS;

const CODECS = {
  none: CompressionTypes.None,
  gzip: CompressionTypes.GZIP,
  snappy: CompressionTypes.Snappy,
  lz4: CompressionTypes.LZ4,
  zstd: CompressionTypes.ZSTD,
};

module.exports = { CODECS };
