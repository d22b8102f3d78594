// The access-mode rules on their own: which claim may join which.
import type { AccessMode, AttachmentMode } from './modes';
import { ClaimError, type VolumeClaimRequest } from './volume-claimer';
import type { VolumeClaimView } from './volume-view';
import { SINGLE_WRITER_ACCESS_MODES, checkClaim } from './claim-rules';

function volume(modes: AccessMode[], claims: VolumeClaimView[] = [], attachmentMode: AttachmentMode = 'file-system') {
  return { id: 'vol', capabilities: modes.map((accessMode) => ({ accessMode, attachmentMode })), claims };
}

function request(allocId: string, accessMode: string, readOnly: boolean, attachmentMode = 'file-system'): VolumeClaimRequest {
  return { volumeId: 'vol', allocId, accessMode, attachmentMode, readOnly };
}

function held(allocId: string, accessMode: string, mode: 'read' | 'write', attachmentMode = 'file-system'): VolumeClaimView {
  return { allocId, accessMode, attachmentMode, mode, since: 0 };
}

function refusal(fn: () => void): ClaimError {
  try {
    fn();
  } catch (err) {
    if (err instanceof ClaimError) return err;
    throw err;
  }
  throw new Error('expected a ClaimError');
}

describe('checkClaim', () => {
  test('a mode the volume does not offer is refused for good, naming both', () => {
    const err = refusal(() => checkClaim(volume(['single-node-writer']), request('a1', 'multi-node-multi-writer', false)));
    expect(err.retryable).toBe(false);
    expect(err.code).toBe('ECLAIM');
    expect(err.message).toContain('"multi-node-multi-writer"');
    expect(err.message).toContain('single-node-writer/file-system');
    const block = refusal(() => checkClaim(volume(['single-node-writer']), request('a1', 'single-node-writer', false, 'block-device')));
    expect(block.retryable).toBe(false);
    expect(block.message).toContain('"block-device"');
  });

  test.each(['single-node-writer', 'single-node-single-writer', 'multi-node-single-writer'] as const)(
    '%s: one writer at a time; readers alongside',
    (mode) => {
      const vol = volume([mode as AccessMode]);
      expect(() => checkClaim(vol, request('a1', mode, false))).not.toThrow();
      vol.claims.push(held('a1', mode, 'write'));
      const err = refusal(() => checkClaim(vol, request('a2', mode, false)));
      expect(err.retryable).toBe(true);
      expect(err.code).toBe('ECLAIM_RETRYABLE');
      expect(err.message).toContain('a1');
      expect(err.message).toContain('a2');
      expect(() => checkClaim(vol, request('a3', mode, true))).not.toThrow();
      vol.claims.push(held('a3', mode, 'read'), held('a4', mode, 'read'));
      expect(() => checkClaim(vol, request('a5', mode, true))).not.toThrow();
      // Once the writer is gone, another may write even with readers around.
      vol.claims.shift();
      expect(() => checkClaim(vol, request('a2', mode, false))).not.toThrow();
    },
  );

  test.each(['single-node-reader-only', 'multi-node-reader-only'] as const)('%s: read claims only, as many as wanted', (mode) => {
    const vol = volume([mode], [held('a1', mode, 'read'), held('a2', mode, 'read')]);
    expect(() => checkClaim(vol, request('a3', mode, true))).not.toThrow();
    const err = refusal(() => checkClaim(vol, request('a3', mode, false)));
    expect(err.retryable).toBe(false);
    expect(err.message).toContain('read_only');
    // Even with no claims at all.
    expect(refusal(() => checkClaim(volume([mode]), request('a9', mode, false))).retryable).toBe(false);
  });

  test('multi-node-multi-writer: any number of writers and readers', () => {
    const mode = 'multi-node-multi-writer';
    const vol = volume([mode], [held('a1', mode, 'write'), held('a2', mode, 'write'), held('a3', mode, 'read')]);
    expect(() => checkClaim(vol, request('a4', mode, false))).not.toThrow();
    expect(() => checkClaim(vol, request('a5', mode, true))).not.toThrow();
  });

  test('single-node-multi-writer: any number of writers and readers (the node is the one limit, kept by the cluster claims)', () => {
    const mode = 'single-node-multi-writer';
    const vol = volume([mode], [held('a1', mode, 'write'), held('a2', mode, 'write'), held('a3', mode, 'read')]);
    expect(() => checkClaim(vol, request('a4', mode, false))).not.toThrow();
    expect(() => checkClaim(vol, request('a5', mode, true))).not.toThrow();
    // Not a single-writer mode: no wait for a writer ever comes from it.
    expect(SINGLE_WRITER_ACCESS_MODES).not.toContain(mode);
  });

  test('a claim with another mode than the current claims waits (retryable)', () => {
    const vol = volume(['single-node-writer', 'multi-node-multi-writer'], [held('a1', 'single-node-writer', 'write')]);
    const err = refusal(() => checkClaim(vol, request('a2', 'multi-node-multi-writer', false)));
    expect(err.retryable).toBe(true);
    expect(err.message).toContain('single-node-writer/file-system');
    expect(err.message).toContain('multi-node-multi-writer/file-system');
    // Read claims too: the volume is published single-node-writer for now.
    expect(refusal(() => checkClaim(vol, request('a3', 'multi-node-multi-writer', true))).retryable).toBe(true);
  });

  test("the alloc's own claim does not count against it (a re-claim is judged like a first one)", () => {
    const mode = 'single-node-writer';
    const vol = volume([mode], [held('a1', mode, 'write')]);
    expect(() => checkClaim(vol, request('a1', mode, false))).not.toThrow();
    expect(() => checkClaim(vol, request('a1', mode, true))).not.toThrow();
  });
});
