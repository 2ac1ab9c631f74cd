export interface AllowedSkip {
  file: string;
  name: string;
  why: string;
}

export declare const ALLOWED_SKIPS: AllowedSkip[];

export interface TapCounts {
  passed: number;
  failed: number;
  skipped: number;
  fileFailures: string[];
  subtestFailures: string[];
  assertionFailures: string[];
  unexpectedSkips: { file: string; name: string }[];
}

export declare function countTap(tap: string): TapCounts;
