export declare const OPTIONS_FILE: string;
export declare const SCRIPT_FILE: string;
export declare function bundleStamp(): string;
export declare function ensureBundle(): Promise<string>;
