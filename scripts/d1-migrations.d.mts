export declare const MARKER: string;
export declare function migrationsStamp(configPath: string): string | undefined;
export declare function isMigrated(stateDir: string, stamp: string | undefined): boolean;
export declare function markMigrated(stateDir: string, stamp: string | undefined): void;
